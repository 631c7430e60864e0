#include "common/fair_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace cairn {
namespace {

// With one thread held busy, queued tasks of a source with a long queue and of two sources
// with one task each must run in turns: the short sources are not left behind the long one.
TEST(FairPoolTest, SourcesTakeTurns) {
  FairPool pool(1, "fair");
  Mutex mu;
  std::vector<int> order;
  std::atomic<bool> release{false};
  pool.Submit(0, [&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (pool.QueueLength() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto record = [&](int v) {
    return [&, v] {
      MutexLock l(&mu);
      order.push_back(v);
    };
  };
  for (int i = 0; i < 5; ++i) pool.Submit(1, record(10 + i));
  pool.Submit(2, record(20));
  pool.Submit(3, record(30));
  EXPECT_EQ(pool.QueueLength(), 7u);
  release = true;
  for (;;) {
    {
      MutexLock l(&mu);
      if (order.size() == 7) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<int>{10, 20, 30, 11, 12, 13, 14}));
}

TEST(FairPoolTest, RunsEveryQueuedTaskBeforeItIsDestroyed) {
  std::atomic<int> ran{0};
  {
    FairPool pool(3, "fair");
    for (int i = 0; i < 1000; ++i) pool.Submit(i % 7, [&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 1000);
}

TEST(FairPoolTest, TasksMaySubmitMoreTasks) {
  std::atomic<int> ran{0};
  {
    FairPool pool(2, "fair");
    for (int i = 0; i < 10; ++i) {
      pool.Submit(i, [&pool, &ran, i] {
        ran.fetch_add(1);
        pool.Submit(i + 100, [&ran] { ran.fetch_add(1); });
      });
    }
    while (ran.load() < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(ran.load(), 20);
}

}  // namespace
}  // namespace cairn
