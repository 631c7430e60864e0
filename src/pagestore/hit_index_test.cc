#include "pagestore/hit_index.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace cairn::pagestore {
namespace {

Hash128 Id(int i) { return Hash128Of("page-" + std::to_string(i)); }

std::shared_ptr<KeptOpenFile> File() { return std::make_shared<KeptOpenFile>(nullptr, 0); }

TEST(HitIndexTest, FindsListedPagesUntilErasedOrExpired) {
  HitIndex hits;
  std::vector<Hash128> log;
  EXPECT_FALSE(hits.Find(Id(1), 100, &log));
  auto file = File();
  hits.Insert(Id(1), {file, 7}, /*expires_at_us=*/0);
  hits.Insert(Id(2), {File(), 8}, /*expires_at_us=*/500);
  std::optional<HitIndex::Hit> hit = hits.Find(Id(1), 100, &log);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->file, file);
  EXPECT_EQ(hit->generation, 7u);
  EXPECT_TRUE(hits.Find(Id(2), 499, &log));
  EXPECT_FALSE(hits.Find(Id(2), 500, &log));  // Its deadline passed: the index decides.
  hits.Insert(Id(1), {file, 9}, 0);           // A new copy replaces the old listing.
  EXPECT_EQ(hits.Find(Id(1), 100, &log)->generation, 9u);
  hits.Erase(Id(1));
  EXPECT_FALSE(hits.Find(Id(1), 100, &log));
  EXPECT_EQ(hits.size(), 1u);
  EXPECT_TRUE(log.empty());
}

TEST(HitIndexTest, LogsEveryHitAndHandsOverFullLogs) {
  HitIndex hits;
  hits.Insert(Id(1), {File(), 1}, 0);
  std::vector<Hash128> handed;
  size_t hits_seen = 0;
  for (size_t i = 0; i < HitIndex::kMaxPendingAccesses + 10; ++i) {
    std::vector<Hash128> full;
    ASSERT_TRUE(hits.Find(Id(1), 0, &full));
    ++hits_seen;
    if (!full.empty()) {
      EXPECT_EQ(hits_seen, HitIndex::kMaxPendingAccesses);  // Exactly when the log fills.
      handed.insert(handed.end(), full.begin(), full.end());
    }
  }
  EXPECT_FALSE(hits.Find(Id(99), 0, &handed));  // A miss logs nothing.
  hits.TakeAccesses(&handed);
  EXPECT_EQ(handed.size(), hits_seen);
  for (const Hash128& id : handed) EXPECT_EQ(id, Id(1));
  std::vector<Hash128> again;
  hits.TakeAccesses(&again);
  EXPECT_TRUE(again.empty());
}

// Run under TSan in CI: hits, listings and drains from many threads; no hit is lost.
TEST(HitIndexTest, ConcurrentHitsListingsAndDrainsLoseNoAccess) {
  HitIndex hits;
  constexpr int kPages = 64;
  for (int i = 0; i < kPages; ++i) hits.Insert(Id(i), {File(), 1}, 0);
  std::atomic<size_t> found{0};
  std::atomic<size_t> drained{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        std::vector<Hash128> full;
        if (hits.Find(Id((i * 7 + t) % kPages), 0, &full)) found.fetch_add(1);
        drained.fetch_add(full.size());
      }
    });
  }
  std::thread lister([&] {  // Re-lists pages as new copies replace them (never unlisted).
    for (int i = 0; !stop.load(); ++i) hits.Insert(Id(i % kPages), {File(), uint64_t(i)}, 0);
  });
  std::thread drainer([&] {
    while (!stop.load()) {
      std::vector<Hash128> out;
      hits.TakeAccesses(&out);
      drained.fetch_add(out.size());
    }
  });
  for (auto& t : threads) t.join();
  stop.store(true);
  lister.join();
  drainer.join();
  std::vector<Hash128> rest;
  hits.TakeAccesses(&rest);
  EXPECT_EQ(found.load(), 6u * 20000);
  EXPECT_EQ(drained.load() + rest.size(), found.load());
}

}  // namespace
}  // namespace cairn::pagestore
