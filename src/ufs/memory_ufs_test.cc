// Memory-specific behaviour; the shared contract runs in local_ufs_test.cc.
#include "ufs/memory_ufs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace cairn::ufs {
namespace {

TEST(MemoryUfsTest, EveryWriteGetsANewVersionEvenWithTheSameBytes) {
  FakeClock clock;
  MemoryUnderStorage ufs("mem://a", &clock);
  std::string v1 = ufs.Put("k", "same");
  clock.Advance(std::chrono::seconds(1));
  std::string v2 = ufs.Put("k", "same");
  EXPECT_FALSE(v1.empty());
  EXPECT_NE(v1, v2);
  auto info = ufs.Stat("k");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->version, v2);
  EXPECT_EQ(info->mtime_ns, clock.WallNanos());
  EXPECT_EQ(ufs.RootUri(), "mem://a");
}

TEST(MemoryUfsTest, TestHooks) {
  MemoryUnderStorage ufs;
  EXPECT_EQ(ufs.Put("../bad", "x"), "");
  ufs.Put("b", "22");
  ufs.Put("a/x", "1");
  EXPECT_EQ(ufs.Get("b"), "22");
  EXPECT_EQ(ufs.Get("nope"), std::nullopt);
  EXPECT_EQ(ufs.Keys(), (std::vector<std::string>{"a/x", "b"}));
  EXPECT_EQ(ufs.ObjectCount(), 2u);
  EXPECT_EQ(ufs.TotalBytes(), 3u);
  ufs.Clear();
  EXPECT_EQ(ufs.ObjectCount(), 0u);
}

TEST(MemoryUfsTest, ConcurrentOverwritesNeverTearReads) {
  MemoryUnderStorage ufs;
  ufs.Put("k", std::string(4096, 'a'));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) {
      std::string data(4096, static_cast<char>('a' + i % 26));
      ASSERT_TRUE(ufs.Write("k", std::span<const char>(data.data(), data.size())).ok());
    }
    stop = true;
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      std::string buf(4096, '\0');
      while (!stop) {
        auto n = ufs.Read("k", "", 0, std::span<char>(buf.data(), buf.size()));
        if (!n.ok() || *n != buf.size() || buf.find_first_not_of(buf[0]) != std::string::npos) {
          ++torn;
        }
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace cairn::ufs
