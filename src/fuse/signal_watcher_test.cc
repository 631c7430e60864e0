#include "fuse/signal_watcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

namespace cairn::fuse {
namespace {

sighandler_t CurrentHandler(int sig) {
  struct sigaction action;
  sigaction(sig, nullptr, &action);
  return action.sa_handler;
}

TEST(SignalWatcherTest, DeliversSignalsOnItsThreadAndRestoresDefaults) {
  std::atomic<int> got{0};
  std::atomic<bool> other_thread{false};
  const auto test_thread = std::this_thread::get_id();
  {
    StatusOr<std::unique_ptr<SignalWatcher>> watcher = SignalWatcher::Start([&](int sig) {
      other_thread = std::this_thread::get_id() != test_thread;
      got = sig;
    });
    ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
    EXPECT_EQ((*watcher)->installed().size(), 3u);
    EXPECT_EQ(SignalWatcher::Start([](int) {}).status().code(), StatusCode::kFailedPrecondition);
    ASSERT_EQ(std::raise(SIGHUP), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(got.load(), SIGHUP);
    EXPECT_TRUE(other_thread.load());
  }
  EXPECT_EQ(CurrentHandler(SIGHUP), SIG_DFL);
  EXPECT_EQ(CurrentHandler(SIGINT), SIG_DFL);
  EXPECT_EQ(CurrentHandler(SIGTERM), SIG_DFL);
}

TEST(SignalWatcherTest, LeavesSignalsTheCallerHandles) {
  ASSERT_NE(std::signal(SIGINT, SIG_IGN), SIG_ERR);
  {
    StatusOr<std::unique_ptr<SignalWatcher>> watcher = SignalWatcher::Start([](int) {});
    ASSERT_TRUE(watcher.ok());
    EXPECT_EQ((*watcher)->installed().size(), 2u);
    EXPECT_EQ(CurrentHandler(SIGINT), SIG_IGN);
  }
  EXPECT_EQ(CurrentHandler(SIGINT), SIG_IGN);
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace
}  // namespace cairn::fuse
