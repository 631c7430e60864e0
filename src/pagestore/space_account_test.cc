#include "pagestore/space_account.h"

#include <gtest/gtest.h>

namespace cairn::pagestore {
namespace {

constexpr uint64_t kSkeleton = 1000;

TEST(SpaceAccountTest, OnceExactAdmitsUpToTheCapacity) {
  SpaceAccount space(/*capacity=*/10'000, kSkeleton, /*initial_credit=*/0);
  space.MarkExact();
  EXPECT_EQ(space.used(), kSkeleton);
  EXPECT_EQ(space.credit(), 0u);
  EXPECT_TRUE(space.Fits(9'000));
  EXPECT_FALSE(space.Fits(9'001));
  EXPECT_EQ(space.Deficit(9'001), 1u);
  space.Reserve(4'000);
  EXPECT_EQ(space.used(), 5'000u);
  EXPECT_EQ(space.reserved(), 4'000u);
  EXPECT_TRUE(space.RoomMayCome(/*scanning=*/false));  // The write in flight becomes a page.
  space.Unreserve(4'000);                              // ... indexed now.
  EXPECT_EQ(space.used(), 5'000u);
  EXPECT_FALSE(space.RoomMayCome(false));
  EXPECT_EQ(space.Deficit(6'000), 1'000u);
}

TEST(SpaceAccountTest, DropsInProgressCountUntilUnlinkedAndCoverDeficits) {
  SpaceAccount space(10'000, kSkeleton, 0);
  space.MarkExact();
  space.Reserve(8'000);
  space.Unreserve(8'000);
  space.StartDrop(3'000);  // Out of the index, file not unlinked yet.
  EXPECT_EQ(space.used(), 9'000u);
  EXPECT_EQ(space.freeing(), 3'000u);
  EXPECT_FALSE(space.Fits(2'000));
  EXPECT_EQ(space.Deficit(2'000), 0u);  // The drop in progress covers it: evict nothing more.
  EXPECT_TRUE(space.RoomMayCome(false));
  space.FinishDrop(3'000, /*unlinked=*/true);
  EXPECT_EQ(space.used(), 6'000u);
  EXPECT_TRUE(space.Fits(2'000));
  // An unlink that failed keeps the bytes counted, as stuck.
  space.StartDrop(1'000);
  space.FinishDrop(1'000, /*unlinked=*/false);
  EXPECT_EQ(space.used(), 6'000u);
  EXPECT_EQ(space.stuck(), 1'000u);
  EXPECT_EQ(space.freeing(), 0u);
}

TEST(SpaceAccountTest, DuringRecoveryWritesNeedCreditAsWell) {
  // 10,000 of capacity, but only 2,500 known to be free: the scan has not counted the rest.
  SpaceAccount space(10'000, kSkeleton, /*initial_credit=*/2'500);
  EXPECT_FALSE(space.exact());
  EXPECT_TRUE(space.Fits(2'500));
  EXPECT_FALSE(space.Fits(2'501));
  EXPECT_EQ(space.Deficit(3'000), 500u);
  EXPECT_TRUE(space.RoomMayCome(/*scanning=*/true));  // The scan may find evictable pages.
  EXPECT_FALSE(space.RoomMayCome(/*scanning=*/false));
  space.Reserve(2'000);
  EXPECT_EQ(space.credit(), 500u);
  space.Unreserve(2'000);
  // Pages found on disk were there all along: used grows, credit does not move.
  space.Adopt(3'000);
  EXPECT_EQ(space.used(), 6'000u);
  EXPECT_EQ(space.credit(), 500u);
  // Every byte released is credit: known free.
  space.StartDrop(3'000);
  space.FinishDrop(3'000, true);
  EXPECT_EQ(space.credit(), 3'500u);
  space.Credit(100);  // Leftover temp files the scan removed.
  EXPECT_EQ(space.credit(), 3'600u);
  space.MarkExact();
  EXPECT_EQ(space.credit(), 0u);
  EXPECT_TRUE(space.Fits(7'000));  // Only the capacity counts from now on.
  space.Release(1'000);
  EXPECT_EQ(space.credit(), 0u);
}

TEST(SpaceAccountTest, ExcessIsWhatALoweredCapacityMustEvict) {
  SpaceAccount space(5'000, kSkeleton, 0);
  space.Adopt(7'000);  // Written under a larger capacity.
  EXPECT_EQ(space.Excess(), 3'000u);
  space.StartDrop(2'000);
  EXPECT_EQ(space.Excess(), 1'000u);
  space.FinishDrop(2'000, true);
  EXPECT_EQ(space.Excess(), 1'000u);
  space.StartDrop(1'000);
  EXPECT_EQ(space.Excess(), 0u);
}

}  // namespace
}  // namespace cairn::pagestore
