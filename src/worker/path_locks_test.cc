#include "worker/path_locks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace cairn::worker {
namespace {

using std::chrono::milliseconds;

// Whether `take` returns within `wait` on another thread (it is joined either way).
template <typename Fn>
bool ReturnsWithin(milliseconds wait, Fn take, std::thread* taker) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> returned = done->get_future();
  *taker = std::thread([take, done] {
    take();
    done->set_value();
  });
  return returned.wait_for(wait) == std::future_status::ready;
}

TEST(PathLocksTest, OnePathWaitsForItsHolderAndNoOtherPathDoes) {
  PathLocks locks;
  PathLocks::Held held = locks.Lock("/lake/big.bin");
  std::thread other;
  EXPECT_TRUE(ReturnsWithin(
      milliseconds(2000), [&] { (void)locks.Lock("/lake/other.bin"); }, &other));
  other.join();
  std::thread same;
  EXPECT_FALSE(ReturnsWithin(
      milliseconds(100), [&] { (void)locks.Lock("/lake/big.bin"); }, &same));
  EXPECT_EQ(locks.size(), 1u);  // The waiter shares the holder's entry.
  held.Release();
  same.join();
  EXPECT_EQ(locks.size(), 0u) << "a path nobody holds or waits for stays in the table";
}

TEST(PathLocksTest, TwoPathsAreTakenTogetherAndOnePathTwiceIsOneLock) {
  PathLocks locks;
  {
    PathLocks::Held both = locks.Lock("/lake/a", "/lake/b");
    EXPECT_EQ(locks.size(), 2u);
    std::thread a;
    EXPECT_FALSE(ReturnsWithin(
        milliseconds(100), [&] { (void)locks.Lock("/lake/a"); }, &a));
    std::thread b;
    EXPECT_FALSE(ReturnsWithin(
        milliseconds(100), [&] { (void)locks.Lock("/lake/b"); }, &b));
    PathLocks::Held moved = std::move(both);  // Still held, by `moved` now.
    both.Release();                           // Holds nothing: a no-op.
    EXPECT_EQ(locks.size(), 2u);
    moved.Release();
    a.join();
    b.join();
  }
  PathLocks::Held self = locks.Lock("/lake/x", "/lake/x");  // No deadlock with itself.
  EXPECT_EQ(locks.size(), 1u);
}

// Renames a -> b and b -> a at once, many times: the pair is always taken in one order.
TEST(PathLocksTest, OppositePairsDoNotDeadlock) {
  PathLocks locks;
  std::atomic<int> done{0};
  auto churn = [&](const std::string& from, const std::string& to) {
    for (int i = 0; i < 2000; ++i) {
      PathLocks::Held held = locks.Lock(from, to);
      PathLocks::Held alone;
      held.Release();
      alone = locks.Lock(i % 2 == 0 ? from : to);
    }
    ++done;
  };
  std::thread forward(churn, "/lake/a", "/lake/b");
  std::thread backward(churn, "/lake/b", "/lake/a");
  forward.join();
  backward.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(locks.size(), 0u);
}

}  // namespace
}  // namespace cairn::worker
