#include "membership/backoff.h"

#include <gtest/gtest.h>

namespace cairn::membership {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DelaysDoubleWithinJitterBoundsUpToTheCap) {
  Backoff b(milliseconds(100), milliseconds(700));
  const int64_t expected_caps[] = {100, 200, 400, 700, 700, 700};
  for (int64_t cap : expected_caps) {
    const int64_t d = b.Next().count();
    EXPECT_GE(d, cap - cap / 2) << "cap " << cap;
    EXPECT_LE(d, cap) << "cap " << cap;
  }
  EXPECT_EQ(b.attempts(), 6);
}

TEST(BackoffTest, ResetStartsAgainFromTheMinimum) {
  Backoff b(milliseconds(10), milliseconds(10'000));
  for (int i = 0; i < 8; ++i) (void)b.Next();
  b.Reset();
  EXPECT_EQ(b.attempts(), 0);
  EXPECT_LE(b.Next().count(), 10);
}

TEST(BackoffTest, IsJitteredAndNeverZero) {
  Backoff b(milliseconds(0), milliseconds(0));  // Raised to 1 ms.
  EXPECT_EQ(b.Next().count(), 1);
  // With a wide range, 50 draws at the cap are not all equal.
  Backoff wide(milliseconds(1000), milliseconds(1000));
  const int64_t first = wide.Next().count();
  bool differs = false;
  for (int i = 0; i < 50; ++i) differs = differs || wide.Next().count() != first;
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace cairn::membership
