// RoomWait: the schedule of a request refused for room (client/room_wait.h).
#include "client/room_wait.h"

#include <gtest/gtest.h>

namespace cairn::client {
namespace {

using std::chrono::milliseconds;

TEST(RoomWaitTest, BacksOffFrom20MillisecondsToOneSecond) {
  RoomWait wait(milliseconds(60'000));
  EXPECT_FALSE(wait.waited());
  int64_t now = 5'000'000;
  std::vector<int64_t> gaps;
  for (int i = 0; i < 9; ++i) {
    std::optional<int64_t> again = wait.Refused(now);
    ASSERT_TRUE(again.has_value());
    gaps.push_back(*again - now);
    now = *again;
  }
  EXPECT_TRUE(wait.waited());
  EXPECT_EQ(gaps, (std::vector<int64_t>{20'000, 40'000, 80'000, 160'000, 320'000, 640'000,
                                        1'000'000, 1'000'000, 1'000'000}));
}

TEST(RoomWaitTest, GivesUpOnceTheLimitHasPassedSinceTheFirstRefusal) {
  RoomWait wait(milliseconds(300));
  ASSERT_TRUE(wait.Refused(1'000'000).has_value());
  ASSERT_TRUE(wait.Refused(1'299'999).has_value());
  EXPECT_FALSE(wait.Refused(1'300'000).has_value());
  EXPECT_EQ(wait.GaveUp(), "no room came in 300 ms");
  // A limit of zero gives up at the first refusal.
  RoomWait none(milliseconds(0));
  EXPECT_FALSE(none.Refused(7).has_value());
}

// A write refused for room is resent by the writer's next call that waits: a writer idle for
// minutes after the refusal had its chunk fail at the first resend, with ENOSPC, though no
// call had waited at all.
TEST(RoomWaitTest, TimeNoResendWasMadeIsNotWaited) {
  RoomWait wait(milliseconds(300));
  std::optional<int64_t> due = wait.Refused(1'000'000);
  ASSERT_TRUE(due.has_value());
  wait.Resending(*due + 120'000'000);  // Two minutes late: nobody was waiting.
  due = wait.Refused(*due + 120'000'000);
  ASSERT_TRUE(due.has_value());
  wait.Resending(*due);
  ASSERT_TRUE(wait.Refused(*due + 200'000).has_value());  // 260 ms waited.
  wait.Resending(1'000'000 + 120'000'000 + 300'000);      // On time (early, even).
  EXPECT_FALSE(wait.Refused(1'000'000 + 120'000'000 + 300'000).has_value());
}

TEST(RoomWaitTest, DescribesWholeSecondsInSeconds) {
  EXPECT_EQ(RoomWait::Describe(milliseconds(60'000)), "60 s");
  EXPECT_EQ(RoomWait::Describe(milliseconds(1'500)), "1500 ms");
}

}  // namespace
}  // namespace cairn::client
