#include "common/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace cairn {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  CAIRN_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrorsCarryCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFoundError("no such object 'a'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: no such object 'a'");
  EXPECT_EQ(s.WithContext("stat").ToString(), "NotFound: stat: no such object 'a'");
}

TEST(StatusTest, AnUnknownOutcomeIsKeptThroughContextAndNeverMarksOk) {
  Status sent = UnavailableError("connection lost").WithOutcomeUnknown();
  EXPECT_TRUE(sent.outcome_unknown());
  EXPECT_EQ(sent.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(sent.WithContext("rename of /a").outcome_unknown());
  EXPECT_FALSE(UnavailableError("connection lost").outcome_unknown());
  EXPECT_FALSE(sent == UnavailableError("connection lost"));
  EXPECT_FALSE(Status::Ok().WithOutcomeUnknown().outcome_unknown());
  EXPECT_TRUE(Status::Ok().WithOutcomeUnknown().ok());
  const Status known = sent.WithOutcomeKnown();
  EXPECT_FALSE(known.outcome_unknown());
  EXPECT_EQ(known, UnavailableError("connection lost"));
}

TEST(StatusTest, NotSentIsKeptThroughContextAndNeverMarksOk) {
  Status refused = UnavailableError("worker w is suspect").WithNotSent();
  EXPECT_TRUE(refused.not_sent());
  EXPECT_FALSE(refused.outcome_unknown());
  EXPECT_TRUE(refused.WithContext("sync of /a").not_sent());
  EXPECT_FALSE(UnavailableError("worker w is suspect").not_sent());
  EXPECT_FALSE(refused == UnavailableError("worker w is suspect"));
  EXPECT_FALSE(Status::Ok().WithNotSent().not_sent());
}

TEST(StatusTest, AReasonIsKeptThroughContextAndNeverMarksOk) {
  const Status capped =
      ResourceExhaustedError("too many files open").WithReason(StatusReason::kTooManyOpenFiles);
  EXPECT_EQ(capped.reason(), StatusReason::kTooManyOpenFiles);
  EXPECT_EQ(capped.WithContext("open of /a").reason(), StatusReason::kTooManyOpenFiles);
  EXPECT_EQ(ResourceExhaustedError("too many files open").reason(), StatusReason::kNone);
  EXPECT_FALSE(capped == ResourceExhaustedError("too many files open"));
  EXPECT_EQ(Status::Ok().WithReason(StatusReason::kTooManyOpenFiles).reason(), StatusReason::kNone);
}

TEST(StatusTest, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoToStatus(EACCES, "open").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "write").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(EIO, "read").code(), StatusCode::kIoError);
}

TEST(StatusOrTest, AssignOrReturnPropagates) {
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = UseHalf(3, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

// value() of an error aborts with the status in every build type (it was undefined behaviour
// with NDEBUG set).
TEST(StatusOrDeathTest, ValueOfAnErrorAbortsWithTheStatus) {
  StatusOr<int> error = NotFoundError("no such page");
  EXPECT_DEATH({ (void)error.value(); },
               "StatusOr::value\\(\\) called on an error: NotFound: no such page");
  EXPECT_DEATH({ (void)*StatusOr<std::string>(InternalError("x")); }, "Internal: x");
}

}  // namespace
}  // namespace cairn
