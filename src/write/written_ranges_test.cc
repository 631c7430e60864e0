#include "write/written_ranges.h"

#include <gtest/gtest.h>

#include <limits>

namespace cairn::write {
namespace {

TEST(WrittenRangesTest, MergesOverlappingAndAdjacentWrites) {
  WrittenRanges r;
  ASSERT_TRUE(r.Add(10, 10).ok());  // [10, 20)
  ASSERT_TRUE(r.Add(30, 5).ok());   // [30, 35)
  EXPECT_EQ(r.interval_count(), 2u);
  EXPECT_FALSE(r.Covers(10, 35));
  ASSERT_TRUE(r.Add(20, 10).ok());  // Fills the gap exactly: one interval.
  EXPECT_EQ(r.interval_count(), 1u);
  EXPECT_TRUE(r.Covers(10, 35));
  EXPECT_FALSE(r.Covers(9, 35));
  EXPECT_FALSE(r.Covers(10, 36));
  ASSERT_TRUE(r.Add(0, 100).ok());  // Swallows everything.
  EXPECT_EQ(r.interval_count(), 1u);
  EXPECT_TRUE(r.Covers(0, 100));
  EXPECT_TRUE(r.Covers(50, 50)) << "an empty range is covered";
}

TEST(WrittenRangesTest, OutOfOrderWritesCoverAPartOnlyWhenAllOfItIsThere) {
  WrittenRanges r;
  for (uint64_t i = 9; i > 0; --i) {
    ASSERT_TRUE(r.Add(i * 100, 100).ok());
    EXPECT_FALSE(r.Covers(0, 1000));
  }
  ASSERT_TRUE(r.Add(0, 100).ok());
  EXPECT_TRUE(r.Covers(0, 1000));
  EXPECT_EQ(r.interval_count(), 1u);
}

TEST(WrittenRangesTest, TruncateForgetsTheTail) {
  WrittenRanges r;
  ASSERT_TRUE(r.Add(0, 100).ok());
  ASSERT_TRUE(r.Add(200, 100).ok());
  r.TruncateTo(250);
  EXPECT_TRUE(r.Covers(200, 250));
  EXPECT_FALSE(r.Covers(200, 251));
  r.TruncateTo(50);
  EXPECT_EQ(r.interval_count(), 1u);
  EXPECT_TRUE(r.Covers(0, 50));
  EXPECT_FALSE(r.Covers(0, 51));
  r.TruncateTo(0);
  EXPECT_EQ(r.interval_count(), 0u);
}

TEST(WrittenRangesTest, RefusesOverflowAndTooManyScatteredRanges) {
  WrittenRanges r(/*max_intervals=*/3);
  EXPECT_EQ(r.Add(std::numeric_limits<uint64_t>::max() - 5, 10).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.Add(0, 1).ok());
  ASSERT_TRUE(r.Add(10, 1).ok());
  ASSERT_TRUE(r.Add(20, 1).ok());
  EXPECT_EQ(r.Add(30, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(r.Add(1, 9).ok()) << "a write that merges adds no interval";
  EXPECT_EQ(r.interval_count(), 2u);
}

}  // namespace
}  // namespace cairn::write
