#include "ufs/retrying_ufs.h"

#include <gtest/gtest.h>

#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"

namespace cairn::ufs {
namespace {

class RetryingUfsTest : public ::testing::Test {
 protected:
  RetryingUfsTest()
      : memory_(std::make_shared<MemoryUnderStorage>()),
        faults_(std::make_shared<FaultInjectingUnderStorage>(memory_, /*seed=*/1, &clock_)) {
    memory_->Put("k", "value");
  }

  std::unique_ptr<RetryingUnderStorage> Make(RetryOptions o) {
    o.seed = o.seed == 0 ? 99 : o.seed;
    return std::make_unique<RetryingUnderStorage>(faults_, o, &clock_);
  }

  FakeClock clock_;
  std::shared_ptr<MemoryUnderStorage> memory_;
  std::shared_ptr<FaultInjectingUnderStorage> faults_;
};

TEST_F(RetryingUfsTest, RetriesTransientFailuresUntilSuccess) {
  auto ufs = Make({});
  faults_->FailNext(UfsOp::kRead, 3);
  int64_t start = clock_.NowMicros();
  std::string buf(5, '\0');
  auto n = ufs->Read("k", "", 0, std::span<char>(buf.data(), buf.size()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(buf, "value");
  EXPECT_EQ(faults_->calls(UfsOp::kRead), 4u);
  EXPECT_EQ(ufs->retries(), 3u);
  // Full jitter: each sleep is at most base * 2^k.
  EXPECT_LE(clock_.NowMicros() - start, 50'000 + 100'000 + 200'000);
}

TEST_F(RetryingUfsTest, DeadlineExceededIsRetriedToo) {
  auto ufs = Make({});
  faults_->FailNext(UfsOp::kStat, 2, DeadlineExceededError("slow"));
  EXPECT_TRUE(ufs->Stat("k").ok());
  EXPECT_EQ(faults_->calls(UfsOp::kStat), 3u);
}

TEST_F(RetryingUfsTest, GivesUpAfterMaxRetriesKeepingTheCode) {
  RetryOptions o;
  o.max_retries = 2;
  auto ufs = Make(o);
  faults_->FailNext(UfsOp::kList, 100, UnavailableError("endpoint down"));
  auto r = ufs->List(ListOptions());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("giving up after 3 attempt(s)"), std::string::npos);
  EXPECT_NE(r.status().message().find("endpoint down"), std::string::npos);
  EXPECT_EQ(faults_->calls(UfsOp::kList), 3u);
}

TEST_F(RetryingUfsTest, FinalErrorsAreNotRetried) {
  auto ufs = Make({});
  for (Status st : {NotFoundError("x"), PermissionDeniedError("x"), FailedPreconditionError("x"),
                    InvalidArgumentError("x")}) {
    faults_->ResetCounters();
    faults_->FailNext(UfsOp::kStat, 1, st);
    EXPECT_EQ(ufs->Stat("k").status().code(), st.code());
    EXPECT_EQ(faults_->calls(UfsOp::kStat), 1u) << st.ToString();
  }
  EXPECT_EQ(ufs->retries(), 0u);
}

TEST_F(RetryingUfsTest, BackoffIsCappedAndTotalTimeBounded) {
  RetryOptions o;
  o.max_retries = 50;
  o.max_elapsed_us = 20'000'000;
  auto ufs = Make(o);
  faults_->FailNext(UfsOp::kWrite, 1000);
  int64_t start = clock_.NowMicros();
  Status st = ufs->Write("k", std::span<const char>("x", 1));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  int64_t elapsed = clock_.NowMicros() - start;
  EXPECT_LE(elapsed, 20'000'000);
  // 50 retries capped at 5 s each could sleep far longer; the elapsed bound stopped it early.
  EXPECT_LT(faults_->calls(UfsOp::kWrite), 51u);
  EXPECT_GT(faults_->calls(UfsOp::kWrite), 4u);
}

TEST_F(RetryingUfsTest, JitterIsReproducibleForASeed) {
  auto run = [&](uint64_t seed) {
    FakeClock clock;
    auto faults = std::make_shared<FaultInjectingUnderStorage>(memory_, 1, &clock);
    faults->FailNext(UfsOp::kStat, 4);
    RetryOptions o;
    o.seed = seed;
    RetryingUnderStorage ufs(faults, o, &clock);
    int64_t start = clock.NowMicros();
    EXPECT_TRUE(ufs.Stat("k").ok());
    return clock.NowMicros() - start;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

// Deletes in the target but reports a lost response the first time.
class LostDeleteResponse : public UnderStorageWrapper {
 public:
  using UnderStorageWrapper::UnderStorageWrapper;
  Status Delete(std::string_view key) override {
    Status st = target()->Delete(key);
    if (first_) {
      first_ = false;
      return UnavailableError("connection reset after sending DELETE");
    }
    return st;
  }

 private:
  bool first_ = true;
};

TEST_F(RetryingUfsTest, DeleteRetriedAfterALostResponseSucceeds) {
  RetryingUnderStorage ufs(std::make_shared<LostDeleteResponse>(memory_), RetryOptions{.seed = 3},
                           &clock_);
  EXPECT_TRUE(ufs.Delete("k").ok());
  EXPECT_EQ(memory_->Get("k"), std::nullopt);
  EXPECT_EQ(ufs.Delete("k").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::ufs
