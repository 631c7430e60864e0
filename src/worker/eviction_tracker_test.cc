#include "worker/eviction_tracker.h"

#include <gtest/gtest.h>

#include "ufs/memory_ufs.h"

namespace cairn::worker {
namespace {

class EvictionTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MountSpec lake{"/lake", "mem://lake", {}, std::chrono::seconds(1)};
    auto table = mount::MountTable::CreateWith(
        {lake}, {std::make_shared<ufs::MemoryUnderStorage>("mem://lake")});
    ASSERT_TRUE(table.ok());
    table_ = *table;
    rules_.SetMounts(table_);
  }
  std::string Id(const std::string& key) { return table_->mounts()[0]->ObjectId(key); }

  FakeClock clock_;
  PageRules rules_{&clock_};
  metrics::Registry registry_;
  std::shared_ptr<const mount::MountTable> table_;
};

TEST_F(EvictionTrackerTest, ChargesTheMountAndFirstFolder) {
  EvictionTracker t(&rules_, &registry_, 8, 1);
  t.Record(Id("train/x/a.jpg"), 100, pagestore::EvictionReason::kCapacity);
  t.Record(Id("train/b.jpg"), 50, pagestore::EvictionReason::kQuota);
  t.Record(Id("val/c.jpg"), 10, pagestore::EvictionReason::kCapacity);
  t.Record(Id("val/d.jpg"), 10, pagestore::EvictionReason::kExpired);  // Not an eviction.
  t.Record(Id("top.bin"), 7, pagestore::EvictionReason::kCapacity);
  t.Record("mem://elsewhere/k", 1, pagestore::EvictionReason::kCapacity);
  auto top = t.Top(10);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0], std::make_pair(std::string("/lake/train"), uint64_t{150}));
  EXPECT_EQ(top[1], std::make_pair(std::string("/lake/val"), uint64_t{10}));
  EXPECT_EQ(top[2], std::make_pair(std::string("/lake"), uint64_t{7}));
  EXPECT_EQ(top[3], std::make_pair(std::string("(unmounted)"), uint64_t{1}));
  std::string text = registry_.ExposeText();
  EXPECT_NE(text.find("cairn_evicted_bytes_by_prefix_total{prefix=\"/lake/train\"} 150"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cairn_mount_removals_total{mount=\"/lake\",reason=\"capacity\"} 3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cairn_mount_removals_total{mount=\"/lake\",reason=\"quota\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("cairn_mount_removals_total{mount=\"/lake\",reason=\"ttl\"} 1"),
            std::string::npos);
}

TEST_F(EvictionTrackerTest, BoundedAndKeepsHeavyHitters) {
  EvictionTracker t(&rules_, &registry_, 3, 1);
  t.Record(Id("big/a"), 1000, pagestore::EvictionReason::kCapacity);
  for (int i = 0; i < 50; ++i) {
    t.Record(Id("small" + std::to_string(i) + "/a"), 1, pagestore::EvictionReason::kCapacity);
  }
  auto top = t.Top(10);
  EXPECT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, "/lake/big");
  EXPECT_EQ(top[0].second, 1000u);
  // Only the tracked prefixes are exported.
  std::string text = registry_.ExposeText();
  size_t series = 0;
  for (size_t at = 0;
       (at = text.find("cairn_evicted_bytes_by_prefix_total{", at)) != std::string::npos; ++at) {
    ++series;
  }
  EXPECT_EQ(series, 3u);
}

}  // namespace
}  // namespace cairn::worker
