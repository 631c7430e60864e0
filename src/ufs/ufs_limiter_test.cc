#include "ufs/ufs_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn::ufs {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kMiB = 1 << 20;

std::shared_ptr<UfsLimiter> MakeLimiter(LimiterOptions options) {
  auto limiter = UfsLimiter::Create(std::move(options));
  EXPECT_TRUE(limiter.ok()) << limiter.status().ToString();
  return limiter.ok() ? *limiter : nullptr;
}

// Polls (real time) until `done` holds or 10 s pass.
template <typename Pred>
bool Eventually(Pred done) {
  for (int i = 0; i < 10'000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return done();
}

void RecordMax(std::atomic<int>& max, int value) {
  int seen = max.load();
  while (value > seen && !max.compare_exchange_weak(seen, value)) {
  }
}

TEST(UfsLimiterTest, CreateRejectsInvalidOptions) {
  LimiterOptions o;
  o.max_concurrency = -1;
  EXPECT_EQ(UfsLimiter::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = LimiterOptions();
  o.clock = nullptr;
  EXPECT_EQ(UfsLimiter::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = LimiterOptions();
  o.successes_per_increase = -2;
  EXPECT_EQ(UfsLimiter::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = LimiterOptions();
  o.decrease_interval = milliseconds(-1);
  EXPECT_EQ(UfsLimiter::Create(o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(UfsLimiter::Create(LimiterOptions()).ok());
}

TEST(UfsLimiterTest, BurstIsAnEighthOfTheRateButAtLeastOnePage) {
  LimiterOptions o;
  o.max_bytes_per_second = 1024 * kMiB;
  EXPECT_EQ(MakeLimiter(o)->burst_bytes(), 128 * kMiB);
  o.max_bytes_per_second = 2 * kMiB;
  EXPECT_EQ(MakeLimiter(o)->burst_bytes(), kMiB);
  o.max_bytes_per_second = 0;
  EXPECT_EQ(MakeLimiter(o)->burst_bytes(), 0u);
}

TEST(UfsLimiterTest, ConcurrencyCapHoldsUnderSixteenThreads) {
  LimiterOptions o;
  o.max_concurrency = 4;
  o.name = "cap4";
  auto limiter = MakeLimiter(o);
  std::atomic<int> current{0}, max_seen{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto permit = limiter->Acquire(0, std::chrono::seconds(30));
        if (!permit.ok()) {
          ++failures;
          continue;
        }
        RecordMax(max_seen, ++current);
        std::this_thread::sleep_for(std::chrono::microseconds(500));
        --current;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_seen.load(), 4);
  LimiterStats s = limiter->stats();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.acquired, 16u * 20u);
  EXPECT_GT(s.waits, 0u);
  EXPECT_GT(s.wait_micros_total, 0u);
  EXPECT_EQ(s.effective_limit, 4);
}

TEST(UfsLimiterTest, BandwidthCapHoldsOverSimulatedTenSeconds) {
  FakeClock clock;
  LimiterOptions o;
  o.max_bytes_per_second = 8 * kMiB;
  o.clock = &clock;
  auto limiter = MakeLimiter(o);
  const int64_t start = clock.NowMicros();
  uint64_t granted = 0;
  // Bounded, so that a limiter that does not limit fails instead of looping forever.
  for (int i = 0; i < 100'000 && clock.NowMicros() - start < 10'000'000; ++i) {
    auto permit = limiter->Acquire(256 * 1024, std::chrono::seconds(30));
    ASSERT_TRUE(permit.ok()) << permit.status().ToString();
    granted += 256 * 1024;
  }
  const double expected = 8.0 * kMiB * 10;
  EXPECT_GE(static_cast<double>(granted), expected * 0.9);
  EXPECT_LE(static_cast<double>(granted), expected * 1.1);
  EXPECT_EQ(limiter->stats().bytes, granted);
}

TEST(UfsLimiterTest, BandwidthCapHoldsWithConcurrentCallersOnAFakeClock) {
  // Only the head of the queue sleeps on the bucket, so simulated time stays consistent even
  // with several threads.
  FakeClock clock;
  LimiterOptions o;
  o.max_bytes_per_second = 16 * kMiB;
  o.clock = &clock;
  auto limiter = MakeLimiter(o);
  const int64_t start = clock.NowMicros();
  std::atomic<uint64_t> granted{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000 && clock.NowMicros() - start < 10'000'000; ++i) {
        auto permit = limiter->Acquire(kMiB, std::chrono::seconds(30));
        if (!permit.ok()) {
          ++failures;
          return;
        }
        granted += kMiB;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const double elapsed_s = static_cast<double>(clock.NowMicros() - start) / 1e6;
  EXPECT_GE(elapsed_s, 10.0);
  EXPECT_LE(elapsed_s, 10.5);
  const double expected = 16.0 * kMiB * 10;
  EXPECT_GE(static_cast<double>(granted.load()), expected * 0.9);
  EXPECT_LE(static_cast<double>(granted.load()), expected * 1.1);
}

TEST(UfsLimiterTest, BandwidthCapOnTheRealClock) {
  LimiterOptions o;
  o.max_bytes_per_second = 8 * kMiB;  // Burst: 1 MiB.
  auto limiter = MakeLimiter(o);
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {
    auto permit = limiter->Acquire(512 * 1024, std::chrono::seconds(10));
    ASSERT_TRUE(permit.ok()) << permit.status().ToString();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  // 4 MiB, of which the first 1 MiB comes out of the full bucket: 3 MiB at 8 MiB/s = 0.375 s.
  EXPECT_GE(seconds, 0.33);
  EXPECT_LE(seconds, 2.0);
}

TEST(UfsLimiterTest, RequestLargerThanTheBurstRunsIntoDebt) {
  FakeClock clock;
  LimiterOptions o;
  o.max_bytes_per_second = kMiB;  // Burst: 1 MiB.
  o.clock = &clock;
  auto limiter = MakeLimiter(o);
  const int64_t start = clock.NowMicros();
  ASSERT_TRUE(limiter->Acquire(4 * kMiB, milliseconds(0)).ok());  // Full bucket: admitted.
  EXPECT_EQ(clock.NowMicros(), start);
  // Metadata calls do not wait for bandwidth, debt or not.
  ASSERT_TRUE(limiter->Acquire(0, milliseconds(0)).ok());
  // 3 MiB of debt plus 1 MiB for this one: 4 s.
  ASSERT_TRUE(limiter->Acquire(kMiB, std::chrono::seconds(10)).ok());
  EXPECT_NEAR(static_cast<double>(clock.NowMicros() - start), 4e6, 1e3);
}

TEST(UfsLimiterTest, WaitForASlotPastMaxWaitIsDeadlineExceeded) {
  LimiterOptions o;
  o.max_concurrency = 1;
  o.name = "worker";
  auto limiter = MakeLimiter(o);
  auto held = limiter->Acquire(0, milliseconds(0));
  ASSERT_TRUE(held.ok());
  auto begin = std::chrono::steady_clock::now();
  auto second = limiter->Acquire(0, milliseconds(50));
  auto waited = std::chrono::steady_clock::now() - begin;
  ASSERT_EQ(second.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(second.status().message().find("'worker'"), std::string::npos)
      << second.status().ToString();
  EXPECT_GE(waited, milliseconds(45));
  LimiterStats s = limiter->stats();
  EXPECT_EQ(s.deadline_exceeded, 1u);
  EXPECT_EQ(s.in_flight, 1);
  EXPECT_EQ(s.queued, 0);
  // max_wait 0 is "only if free now".
  EXPECT_EQ(limiter->Acquire(0, milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  held = InternalError("release");  // Overwriting the StatusOr destroys the permit...
  EXPECT_EQ(limiter->stats().in_flight, 0);
  EXPECT_TRUE(limiter->Acquire(0, milliseconds(0)).ok());  // ...so a slot is free again.
}

TEST(UfsLimiterTest, WaitForBandwidthPastMaxWaitFailsWithoutSleeping) {
  FakeClock clock;
  LimiterOptions o;
  o.max_bytes_per_second = kMiB;
  o.clock = &clock;
  auto limiter = MakeLimiter(o);
  ASSERT_TRUE(limiter->Acquire(kMiB, milliseconds(0)).ok());
  const int64_t before = clock.NowMicros();
  auto late = limiter->Acquire(kMiB, milliseconds(500));  // Needs 1 s.
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("bandwidth"), std::string::npos);
  EXPECT_EQ(clock.NowMicros(), before);
  auto in_time = limiter->Acquire(kMiB, milliseconds(1500));
  EXPECT_TRUE(in_time.ok());
  EXPECT_NEAR(static_cast<double>(clock.NowMicros() - before), 1e6, 1e3);
}

TEST(UfsLimiterTest, PermitsAreMoveOnlyAndReleaseOnce) {
  LimiterOptions o;
  o.max_concurrency = 2;
  auto limiter = MakeLimiter(o);
  {
    auto a = limiter->Acquire(0, milliseconds(0));
    ASSERT_TRUE(a.ok());
    UfsLimiter::Permit moved = std::move(a).value();
    EXPECT_TRUE(moved.valid());
    UfsLimiter::Permit target;
    EXPECT_FALSE(target.valid());
    target = std::move(moved);
    EXPECT_FALSE(moved.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state.
    EXPECT_EQ(limiter->stats().in_flight, 1);
  }
  EXPECT_EQ(limiter->stats().in_flight, 0);
}

TEST(UfsLimiterTest, PermitOutlivesTheCallersReferenceToTheLimiter) {
  LimiterOptions o;
  o.max_concurrency = 1;
  auto limiter = MakeLimiter(o);
  auto permit = limiter->Acquire(0, milliseconds(0));
  ASSERT_TRUE(permit.ok());
  std::weak_ptr<UfsLimiter> weak = limiter;
  limiter.reset();
  EXPECT_FALSE(weak.expired());
  permit = InternalError("drop");  // Releases the permit and, with it, the last owner.
  EXPECT_TRUE(weak.expired());
}

TEST(UfsLimiterTest, RefundReturnsUnusedBytesToTheBucket) {
  FakeClock clock;
  LimiterOptions o;
  o.max_bytes_per_second = kMiB;
  o.clock = &clock;
  auto limiter = MakeLimiter(o);
  auto permit = limiter->Acquire(kMiB, milliseconds(0));
  ASSERT_TRUE(permit.ok());
  EXPECT_EQ(limiter->Acquire(kMiB / 2, milliseconds(0)).status().code(),
            StatusCode::kDeadlineExceeded);
  permit->Refund(kMiB / 2);
  permit->Refund(kMiB);  // Only what is left of the charge (another 1/2 MiB) comes back.
  EXPECT_EQ(limiter->stats().bytes, 0u);
  EXPECT_TRUE(limiter->Acquire(kMiB, milliseconds(0)).ok());
}

TEST(UfsLimiterTest, WaitersAreServedInArrivalOrder) {
  LimiterOptions o;
  o.max_concurrency = 1;
  auto limiter = MakeLimiter(o);
  auto held = limiter->Acquire(0, milliseconds(0));
  ASSERT_TRUE(held.ok());
  std::mutex order_mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  bool enqueued_one_by_one = true;
  // Waiters keep their permit until the newcomer has tried: otherwise, on a loaded machine, all
  // four could be served and gone before the newcomer arrives, leaving nothing to barge past.
  std::atomic<bool> newcomer_tried{false};
  for (int i = 0; i < 4 && enqueued_one_by_one; ++i) {
    threads.emplace_back([&, i] {
      auto p = limiter->Acquire(0, std::chrono::seconds(30));
      {
        std::lock_guard<std::mutex> lock(order_mu);
        order.push_back(p.ok() ? i : -1);
      }
      while (!newcomer_tried.load()) std::this_thread::sleep_for(milliseconds(1));
    });
    // Enqueue one at a time so that the arrival order is known.
    enqueued_one_by_one = Eventually([&] { return limiter->stats().queued == i + 1; });
  }
  held = InternalError("release");
  // A newcomer does not barge past the queue, even in the instant after a release when the slot
  // is free and the woken head has not taken it yet.
  auto newcomer = limiter->Acquire(0, milliseconds(0));
  EXPECT_EQ(newcomer.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(newcomer.status().message().find("still behind"), std::string::npos)
      << newcomer.status().ToString();
  newcomer_tried = true;
  for (auto& t : threads) t.join();
  ASSERT_TRUE(enqueued_one_by_one);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

// A clock whose sleeps block until the test opens the gate, to hold a waiter inside its
// bandwidth sleep.
class GatedClock : public Clock {
 public:
  int64_t NowMicros() const override { return now_.load(); }
  int64_t WallNanos() const override { return now_.load() * 1000; }
  void SleepForMicros(int64_t micros) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      cv_.wait(lock, [&] { return open_; });
      --sleepers_;
    }
    now_ += micros;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int sleepers() {
    std::lock_guard<std::mutex> lock(mu_);
    return sleepers_;
  }

 private:
  std::atomic<int64_t> now_{1'000'000};
  std::mutex mu_;
  std::condition_variable cv_;
  int sleepers_ = 0;
  bool open_ = false;
};

TEST(UfsLimiterTest, ReadWaitingForBandwidthIsNotOvertakenByMetadataCalls) {
  GatedClock clock;
  LimiterOptions o;
  o.max_bytes_per_second = kMiB;
  o.clock = &clock;
  auto limiter = MakeLimiter(o);
  ASSERT_TRUE(limiter->Acquire(kMiB, milliseconds(0)).ok());  // Empties the bucket.
  std::atomic<bool> read_ok{false};
  std::thread reader([&] { read_ok = limiter->Acquire(kMiB, std::chrono::seconds(10)).ok(); });
  bool sleeping = Eventually([&] { return clock.sleepers() == 1; });
  // Slots are unlimited and a Stat needs no bandwidth, but it arrived after the read.
  auto stat = limiter->Acquire(0, milliseconds(0));
  clock.Open();
  reader.join();
  ASSERT_TRUE(sleeping);
  EXPECT_EQ(stat.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(read_ok.load());
  EXPECT_TRUE(limiter->Acquire(0, milliseconds(0)).ok());
}

TEST(UfsLimiterTest, ThrottlingHalvesTheCapOncePerIntervalNotBelowOne) {
  FakeClock clock;
  LimiterOptions o;
  o.max_concurrency = 16;
  o.clock = &clock;
  o.decrease_interval = milliseconds(1000);
  auto limiter = MakeLimiter(o);
  limiter->OnThrottled();
  EXPECT_EQ(limiter->stats().effective_limit, 8);
  limiter->OnThrottled();  // Same push-back, reported by another request in flight.
  EXPECT_EQ(limiter->stats().effective_limit, 8);
  for (int expected : {4, 2, 1, 1}) {
    clock.Advance(std::chrono::seconds(1));
    limiter->OnThrottled();
    EXPECT_EQ(limiter->stats().effective_limit, expected);
  }
  EXPECT_EQ(limiter->stats().throttled_events, 6u);
}

TEST(UfsLimiterTest, SuccessesGrowTheCapBackUpToTheMaximum) {
  LimiterOptions o;
  o.max_concurrency = 8;
  o.successes_per_increase = 3;
  auto limiter = MakeLimiter(o);
  limiter->OnThrottled();
  ASSERT_EQ(limiter->stats().effective_limit, 4);
  for (int expected = 5; expected <= 8; ++expected) {
    limiter->OnSuccess();
    limiter->OnSuccess();
    EXPECT_EQ(limiter->stats().effective_limit, expected - 1);
    limiter->OnSuccess();
    EXPECT_EQ(limiter->stats().effective_limit, expected);
  }
  for (int i = 0; i < 100; ++i) limiter->OnSuccess();
  EXPECT_EQ(limiter->stats().effective_limit, 8);
}

TEST(UfsLimiterTest, DefaultIncreaseIsOneStepPerWindowOfSuccesses) {
  LimiterOptions o;
  o.max_concurrency = 8;
  auto limiter = MakeLimiter(o);
  limiter->OnThrottled();
  ASSERT_EQ(limiter->stats().effective_limit, 4);
  for (int i = 0; i < 3; ++i) limiter->OnSuccess();
  EXPECT_EQ(limiter->stats().effective_limit, 4);
  limiter->OnSuccess();
  EXPECT_EQ(limiter->stats().effective_limit, 5);
  for (int i = 0; i < 4; ++i) limiter->OnSuccess();
  EXPECT_EQ(limiter->stats().effective_limit, 5);
  limiter->OnSuccess();
  EXPECT_EQ(limiter->stats().effective_limit, 6);
}

TEST(UfsLimiterTest, HalvedCapAdmitsNoNewRequestsUntilInFlightDropsBelowIt) {
  LimiterOptions o;
  o.max_concurrency = 4;
  auto limiter = MakeLimiter(o);
  std::vector<UfsLimiter::Permit> held;
  for (int i = 0; i < 3; ++i)
    held.push_back(std::move(limiter->Acquire(0, milliseconds(0))).value());
  limiter->OnThrottled();
  ASSERT_EQ(limiter->stats().effective_limit, 2);
  EXPECT_EQ(limiter->Acquire(0, milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  held.pop_back();
  EXPECT_EQ(limiter->Acquire(0, milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  held.pop_back();
  EXPECT_TRUE(limiter->Acquire(0, milliseconds(0)).ok());
}

TEST(UfsLimiterTest, UnlimitedLimiterCapsAtHalfTheInFlightCountAndLiftsOnRecovery) {
  LimiterOptions o;
  o.max_concurrency = 0;
  o.successes_per_increase = 1;
  auto limiter = MakeLimiter(o);
  limiter->OnSuccess();  // No cap, nothing to recover.
  EXPECT_EQ(limiter->stats().effective_limit, 0);
  std::vector<UfsLimiter::Permit> held;
  for (int i = 0; i < 8; ++i)
    held.push_back(std::move(limiter->Acquire(0, milliseconds(0))).value());
  limiter->OnThrottled();
  EXPECT_EQ(limiter->stats().effective_limit, 4);
  EXPECT_EQ(limiter->Acquire(0, milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  for (int expected : {5, 6, 7}) {
    limiter->OnSuccess();
    EXPECT_EQ(limiter->stats().effective_limit, expected);
  }
  limiter->OnSuccess();  // Reaches the 8 that provoked the push-back: the cap is lifted.
  EXPECT_EQ(limiter->stats().effective_limit, 0);
  EXPECT_TRUE(limiter->Acquire(0, milliseconds(0)).ok());
}

TEST(UfsLimiterTest, RaisingTheCapWakesAWaiter) {
  LimiterOptions o;
  o.max_concurrency = 2;
  o.successes_per_increase = 1;
  auto limiter = MakeLimiter(o);
  auto held = limiter->Acquire(0, milliseconds(0));
  ASSERT_TRUE(held.ok());
  limiter->OnThrottled();  // Cap 1, one in flight.
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = limiter->Acquire(0, std::chrono::seconds(5)).ok(); });
  bool queued = Eventually([&] { return limiter->stats().queued == 1; });
  limiter->OnSuccess();  // Cap 2: the waiter gets in while the first permit is still held.
  waiter.join();
  EXPECT_TRUE(queued);
  EXPECT_TRUE(got.load());
  EXPECT_TRUE(held.ok());
}

}  // namespace
}  // namespace cairn::ufs
