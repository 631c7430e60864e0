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
// call had waited at all. A resend that late starts a new wait; one a waiting call makes late
// (after a timeout and a backoff) does not.
TEST(RoomWaitTest, AResendFarPastItsTimeStartsANewWait) {
  RoomWait wait(milliseconds(300));
  std::optional<int64_t> due = wait.Refused(1'000'000);
  ASSERT_TRUE(due.has_value());
  const int64_t later = *due + 120'000'000;  // Two minutes late: nobody was waiting.
  wait.Resending(later);
  due = wait.Refused(later);
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(*due - later, 20'000);  // The backoff starts over too.
  wait.Resending(*due + 300'000);   // Late, but within the gap (the limit): the same wait.
  EXPECT_FALSE(wait.Refused(*due + 300'000).has_value());
  // The gap is 10 s at most.
  RoomWait minute(milliseconds(60'000));
  due = minute.Refused(1'000'000);
  minute.Resending(*due + 9'000'000);
  EXPECT_FALSE(minute.Refused(*due + 60'000'000).has_value());
  RoomWait again(milliseconds(60'000));
  due = again.Refused(1'000'000);
  again.Resending(*due + 11'000'000);
  EXPECT_TRUE(again.Refused(*due + 60'000'000).has_value());
}

TEST(RoomWaitTest, DescribesWholeSecondsInSeconds) {
  EXPECT_EQ(RoomWait::Describe(milliseconds(60'000)), "60 s");
  EXPECT_EQ(RoomWait::Describe(milliseconds(1'500)), "1500 ms");
}

}  // namespace
}  // namespace cairn::client
