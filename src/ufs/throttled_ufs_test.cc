#include "ufs/throttled_ufs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"
#include "ufs/retrying_ufs.h"
#include "ufs/s3_errors.h"

namespace cairn::ufs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMiB = 1 << 20;

// Records how many calls are inside the target at once; each call stays a little while (real
// time) so that concurrent callers overlap.
class InFlightProbe : public UnderStorageWrapper {
 public:
  InFlightProbe(std::shared_ptr<UnderStorage> target, std::atomic<int>* shared_current = nullptr,
                std::atomic<int>* shared_max = nullptr)
      : UnderStorageWrapper(std::move(target)),
        shared_current_(shared_current),
        shared_max_(shared_max) {}

  StatusOr<ObjectInfo> Stat(std::string_view key) override {
    Enter();
    auto r = target()->Stat(key);
    Leave();
    return r;
  }
  StatusOr<size_t> Read(std::string_view key, std::string_view version, uint64_t offset,
                        std::span<char> out) override {
    Enter();
    auto r = target()->Read(key, version, offset, out);
    Leave();
    return r;
  }

  int max() const { return max_.load(); }

 private:
  static void RecordMax(std::atomic<int>& max, int value) {
    int seen = max.load();
    while (value > seen && !max.compare_exchange_weak(seen, value)) {
    }
  }
  void Enter() {
    RecordMax(max_, ++current_);
    if (shared_current_ != nullptr) RecordMax(*shared_max_, ++*shared_current_);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  void Leave() {
    --current_;
    if (shared_current_ != nullptr) --*shared_current_;
  }

  std::atomic<int> current_{0}, max_{0};
  std::atomic<int>* shared_current_;
  std::atomic<int>* shared_max_;
};

std::shared_ptr<UfsLimiter> MakeLimiter(int max_concurrency, uint64_t bytes_per_second = 0,
                                        Clock* clock = Clock::Real(), std::string name = "") {
  LimiterOptions o;
  o.max_concurrency = max_concurrency;
  o.max_bytes_per_second = bytes_per_second;
  o.clock = clock;
  o.name = std::move(name);
  auto limiter = UfsLimiter::Create(o);
  EXPECT_TRUE(limiter.ok()) << limiter.status().ToString();
  return limiter.ok() ? *limiter : nullptr;
}

Status SlowDown() {
  s3::RequestContext ctx{"GET", "s3://b/k", "b", "http://127.0.0.1:9", "environment"};
  return s3::StatusFromHttp(
      503,
      "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
      ctx);
}

StatusOr<size_t> ReadInto(UnderStorage& ufs, std::string_view key, std::string& buf) {
  return ufs.Read(key, "", 0, std::span<char>(buf.data(), buf.size()));
}

TEST(IsThrottledTest, RecognisesPushBackAsTheS3StoreReportsIt) {
  s3::RequestContext ctx{"GET", "s3://b/k", "b", "http://127.0.0.1:9", "environment"};
  EXPECT_TRUE(IsThrottled(SlowDown()));
  EXPECT_TRUE(IsThrottled(s3::StatusFromHttp(503, "", ctx)));
  EXPECT_TRUE(IsThrottled(s3::StatusFromHttp(429, "", ctx)));
  // Still recognised once RetryingUnderStorage has given up on it.
  EXPECT_TRUE(IsThrottled(SlowDown().WithContext("giving up after 6 attempt(s)")));
  EXPECT_FALSE(IsThrottled(s3::StatusFromHttp(500, "", ctx)));
  EXPECT_FALSE(IsThrottled(s3::StatusFromCurl(7, "", ctx, 1000)));  // CURLE_COULDNT_CONNECT.
  EXPECT_FALSE(IsThrottled(NotFoundError("no such object SlowDown")));
  EXPECT_FALSE(IsThrottled(Status::Ok()));
}

class ThrottledUfsTest : public ::testing::Test {
 protected:
  ThrottledUfsTest() : memory_(std::make_shared<MemoryUnderStorage>()) {
    memory_->Put("k", std::string(kMiB, 'x'));
    memory_->Put("small", std::string(100, 's'));
  }

  std::shared_ptr<MemoryUnderStorage> memory_;
};

TEST_F(ThrottledUfsTest, ConcurrencyCapHoldsUnderSixteenThreads) {
  auto probe = std::make_shared<InFlightProbe>(memory_);
  auto limiter = MakeLimiter(3);
  ThrottledUnderStorage ufs(probe, {limiter});
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::string buf(4096, '\0');
      for (int i = 0; i < 15; ++i) {
        bool ok = (t + i) % 2 == 0 ? ReadInto(ufs, "k", buf).ok() : ufs.Stat("k").ok();
        if (!ok) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(probe->max(), 3);
  EXPECT_EQ(limiter->stats().in_flight, 0);
  EXPECT_EQ(limiter->stats().acquired, 16u * 15u);
}

TEST_F(ThrottledUfsTest, WorkerAndMountLimitersApplyTogether) {
  std::atomic<int> total_current{0}, total_max{0};
  auto worker = MakeLimiter(3, 0, Clock::Real(), "worker");
  auto probe_a = std::make_shared<InFlightProbe>(memory_, &total_current, &total_max);
  auto probe_b = std::make_shared<InFlightProbe>(memory_, &total_current, &total_max);
  ThrottledUnderStorage mount_a(probe_a, {worker, MakeLimiter(2, 0, Clock::Real(), "a")});
  ThrottledUnderStorage mount_b(probe_b, {MakeLimiter(2, 0, Clock::Real(), "b"), worker});
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      ThrottledUnderStorage& ufs = t % 2 == 0 ? mount_a : mount_b;
      for (int i = 0; i < 20; ++i) {
        if (!ufs.Stat("k").ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(probe_a->max(), 2);
  EXPECT_EQ(probe_b->max(), 2);
  EXPECT_EQ(total_max.load(), 3);
  EXPECT_EQ(worker->stats().acquired, 16u * 20u);
  EXPECT_EQ(worker->stats().in_flight, 0);
}

TEST_F(ThrottledUfsTest, WorkerAndMountBandwidthCapsApplyTogether) {
  FakeClock clock;
  auto worker = MakeLimiter(0, 8 * kMiB, &clock, "worker");
  auto narrow = std::make_shared<ThrottledUnderStorage>(
      memory_, std::vector{worker, MakeLimiter(0, 4 * kMiB, &clock, "narrow")});
  auto wide = std::make_shared<ThrottledUnderStorage>(
      memory_, std::vector{worker, MakeLimiter(0, 0, &clock, "wide")});
  // Over a simulated 10 s each: the mount's own cap binds for `narrow`, the worker's for `wide`.
  for (auto [ufs, rate] : {std::pair{narrow, 4.0 * kMiB}, std::pair{wide, 8.0 * kMiB}}) {
    const int64_t start = clock.NowMicros();
    uint64_t read = 0;
    std::string buf(kMiB, '\0');
    for (int i = 0; i < 10'000 && clock.NowMicros() - start < 10'000'000; ++i) {
      auto n = ReadInto(*ufs, "k", buf);
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      read += *n;
    }
    EXPECT_GE(static_cast<double>(read), rate * 10 * 0.9);
    EXPECT_LE(static_cast<double>(read), rate * 10 * 1.1);
  }
}

TEST_F(ThrottledUfsTest, PermitsAreFreedWhenTheSourceFails) {
  auto faults = std::make_shared<FaultInjectingUnderStorage>(memory_, /*seed=*/1);
  auto worker = MakeLimiter(1);
  auto mount = MakeLimiter(1);
  // max_wait 0: a single leaked permit would make every later call fail.
  ThrottledUnderStorage ufs(faults, {worker, mount}, milliseconds(0));
  faults->FailNext(UfsOp::kRead, 3, UnavailableError("connection reset"));
  faults->FailNext(UfsOp::kStat, 3, NotFoundError("gone"));
  std::string buf(16, '\0');
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ReadInto(ufs, "k", buf).status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(ufs.Stat("k").status().code(), StatusCode::kNotFound);
  }
  EXPECT_EQ(ufs.Stat("missing").status().code(), StatusCode::kNotFound);  // From the store.
  EXPECT_EQ(worker->stats().in_flight, 0);
  EXPECT_EQ(mount->stats().in_flight, 0);
  EXPECT_TRUE(ReadInto(ufs, "k", buf).ok());
  EXPECT_TRUE(ufs.Stat("k").ok());
}

TEST_F(ThrottledUfsTest, MaxWaitExceededFailsWithoutReachingTheSource) {
  auto faults = std::make_shared<FaultInjectingUnderStorage>(memory_, /*seed=*/1);
  auto worker = MakeLimiter(1, 0, Clock::Real(), "worker");
  auto mount = MakeLimiter(1, 0, Clock::Real(), "mount");  // Created later: acquired first.
  ThrottledUnderStorage ufs(faults, {worker, mount}, milliseconds(50));
  auto held = worker->Acquire(0, milliseconds(0));
  ASSERT_TRUE(held.ok());
  auto st = ufs.Stat("k");
  EXPECT_EQ(st.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.status().message().find("'worker'"), std::string::npos) << st.status().ToString();
  EXPECT_EQ(faults->total_calls(), 0u);
  // The mount permit taken before the wait on the worker was handed back.
  EXPECT_EQ(mount->stats().in_flight, 0);
  held = InternalError("release");
  EXPECT_TRUE(ufs.Stat("k").ok());
}

TEST_F(ThrottledUfsTest, SlowDownHalvesTheCapAndSuccessesRestoreIt) {
  auto faults = std::make_shared<FaultInjectingUnderStorage>(memory_, /*seed=*/1);
  LimiterOptions o;
  o.max_concurrency = 8;
  o.successes_per_increase = 1;
  auto limiter = *UfsLimiter::Create(o);
  ThrottledUnderStorage ufs(faults, {limiter});
  std::string buf(16, '\0');

  faults->FailNext(UfsOp::kRead, 1, SlowDown());
  EXPECT_EQ(ReadInto(ufs, "k", buf).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(limiter->stats().effective_limit, 4);
  EXPECT_EQ(limiter->stats().throttled_events, 1u);

  // A transient failure that is not push-back neither shrinks nor grows the cap.
  faults->FailNext(UfsOp::kRead, 1, UnavailableError("cannot reach S3 endpoint"));
  EXPECT_FALSE(ReadInto(ufs, "k", buf).ok());
  EXPECT_EQ(limiter->stats().effective_limit, 4);
  EXPECT_EQ(limiter->stats().throttled_events, 1u);

  // Answers count as successes, NotFound included.
  EXPECT_EQ(ufs.Stat("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(limiter->stats().effective_limit, 5);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(ReadInto(ufs, "k", buf).ok());
  EXPECT_EQ(limiter->stats().effective_limit, 8);
  EXPECT_EQ(limiter->stats().in_flight, 0);
}

TEST_F(ThrottledUfsTest, EveryRetryOfASlowedDownCallReachesTheLimiter) {
  // The recommended stack: Retrying(Throttled(source)).
  FakeClock clock;
  auto faults = std::make_shared<FaultInjectingUnderStorage>(memory_, /*seed=*/1, &clock);
  LimiterOptions o;
  o.max_concurrency = 64;
  o.clock = &clock;
  o.decrease_interval = milliseconds(0);  // Count every push-back, to see each attempt.
  auto limiter = *UfsLimiter::Create(o);
  RetryOptions retry;
  retry.max_retries = 3;
  retry.seed = 5;
  RetryingUnderStorage ufs(std::make_shared<ThrottledUnderStorage>(faults, std::vector{limiter}),
                           retry, &clock);
  faults->FailNext(UfsOp::kStat, 3, SlowDown());
  EXPECT_TRUE(ufs.Stat("k").ok());
  EXPECT_EQ(limiter->stats().throttled_events, 3u);
  EXPECT_EQ(limiter->stats().effective_limit, 8);
  EXPECT_EQ(limiter->stats().acquired, 4u);
}

TEST_F(ThrottledUfsTest, ReadsAndWritesAreChargedWhatCrossesTheLink) {
  FakeClock clock;
  auto limiter = MakeLimiter(0, kMiB, &clock);
  ThrottledUnderStorage ufs(memory_, {limiter});
  std::string buf(kMiB, '\0');
  auto n = ReadInto(ufs, "small", buf);  // Asks for 1 MiB, gets 100 bytes.
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 100u);
  EXPECT_EQ(limiter->stats().bytes, 100u);
  ASSERT_TRUE(ufs.Stat("k").ok());
  ASSERT_TRUE(ufs.List(ListOptions()).ok());
  EXPECT_EQ(limiter->stats().bytes, 100u);
  std::string data(3000, 'w');
  ASSERT_TRUE(ufs.Write("new", std::span<const char>(data.data(), data.size())).ok());
  EXPECT_EQ(limiter->stats().bytes, 3100u);
  ASSERT_TRUE(ufs.Delete("new").ok());
  EXPECT_EQ(limiter->stats().bytes, 3100u);
  // The refund put the unread part back: a full 1 MiB read is short by only 3100 bytes, which
  // take ~3 ms to refill at 1 MiB/s.
  const int64_t before = clock.NowMicros();
  ASSERT_TRUE(ReadInto(ufs, "k", buf).ok());
  EXPECT_LE(clock.NowMicros() - before, 4'000);
}

TEST_F(ThrottledUfsTest, AcquisitionOrderIsGlobalAndIgnoresNullsAndDuplicates) {
  auto worker = MakeLimiter(1, 0, Clock::Real(), "worker");
  auto mount = MakeLimiter(1, 0, Clock::Real(), "mount");
  ThrottledUnderStorage one(memory_, {worker, mount, nullptr, worker});
  ThrottledUnderStorage two(memory_, {mount, worker});
  ASSERT_EQ(one.limiters().size(), 2u);
  EXPECT_EQ(one.limiters(), two.limiters());
  EXPECT_EQ(one.limiters().front(), mount);
  // Listing a cap-1 limiter twice must not wait for a second slot of its own.
  ThrottledUnderStorage dup(memory_, {worker, worker}, milliseconds(0));
  EXPECT_TRUE(dup.Stat("k").ok());
  ThrottledUnderStorage none(memory_, {});
  EXPECT_TRUE(none.Stat("k").ok());
}

TEST_F(ThrottledUfsTest, OppositeConstructorOrdersDoNotDeadlock) {
  auto x = MakeLimiter(1);
  auto y = MakeLimiter(1);
  auto probe = std::make_shared<InFlightProbe>(memory_);
  // A deadlock would show as DeadlineExceeded; each call otherwise waits well under a second.
  ThrottledUnderStorage xy(probe, {x, y}, std::chrono::seconds(2));
  ThrottledUnderStorage yx(probe, {y, x}, std::chrono::seconds(2));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (!(t % 2 == 0 ? xy : yx).Stat("k").ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(probe->max(), 1);
}

}  // namespace
}  // namespace cairn::ufs
