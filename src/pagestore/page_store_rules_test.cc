// Cache rules in the page store: pinning, priority classes, TTLs, group quotas, re-attribution,
// rules applied at recovery, and the counters that report them. MemDisk and FakeClock.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "pagestore/cache_dir.h"
#include "pagestore/layout.h"
#include "pagestore/mem_disk.h"
#include "pagestore/page_attributes.h"
#include "pagestore/page_store.h"
#include "pagestore/test_util.h"
#include "testing/fault_injecting_disk.h"

namespace cairn::pagestore {
namespace {

using cairn::testing::DiskOp;
using cairn::testing::FaultInjectingDisk;
using cairn::testing::Gate;
using policy::EntryHints;
using policy::Priority;
using testing::Bytes;

constexpr uint64_t kSkeleton = CacheDir::kSkeletonBytes;
// A page of up to 4096 data bytes with a short key: one header block + one data block + name.
constexpr uint64_t kCharge = 2 * 4096 + CacheDir::kDirEntryCharge;
constexpr int64_t kSecond = 1'000'000;

PageKey K(const std::string& object, uint64_t page = 0) { return PageKey{object, "v1", page}; }

// Hints by object id prefix (the longest matching prefix wins), changeable while a store runs,
// as the worker's namespace rules are.
class Rules {
 public:
  void Set(const std::string& prefix, EntryHints hints) {
    std::lock_guard<std::mutex> l(mu_);
    rules_[prefix] = hints;
  }
  void Clear(const std::string& prefix) {
    std::lock_guard<std::mutex> l(mu_);
    rules_.erase(prefix);
  }
  AttributeResolver Resolver() {
    return [this](std::string_view object_id) {
      std::lock_guard<std::mutex> l(mu_);
      EntryHints best;
      size_t best_length = 0;
      for (const auto& [prefix, hints] : rules_) {
        if (object_id.starts_with(prefix) && prefix.size() >= best_length) {
          best = hints;
          best_length = prefix.size();
        }
      }
      return best;
    };
  }

 private:
  std::mutex mu_;
  std::map<std::string, EntryHints> rules_;
};

class RulesTest : public ::testing::Test {
 protected:
  PageStoreOptions Options(uint64_t pages_capacity) {
    PageStoreOptions o;
    o.dirs = {{"/cache", kSkeleton + pages_capacity * kCharge}};
    o.page_size = 4096;
    o.disk = disk_;
    o.clock = &clock_;
    o.attributes = rules_.Resolver();
    return o;
  }
  std::unique_ptr<PageStore> Make(const PageStoreOptions& options) {
    auto store = PageStore::Create(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    EXPECT_TRUE(testing::WaitForRecovery(**store));
    return std::move(store).value();
  }
  void PutOk(PageStore& store, const PageKey& key) {
    Status s = store.Put(key, Bytes(key.page_index, 100));
    ASSERT_TRUE(s.ok()) << key.object_id << "#" << key.page_index << ": " << s.ToString();
  }
  size_t PageFiles() { return disk_->ListAllFiles().size() - 1; }  // - LOCK

  std::shared_ptr<MemDisk> disk_ = std::make_shared<MemDisk>();
  FakeClock clock_;
  Rules rules_;
};

TEST_F(RulesTest, PinnedPagesSurviveAFloodThenPutIsResourceExhausted) {
  rules_.Set("s3://pinned/", {.pinned = true});
  auto store = Make(Options(4));
  PutOk(*store, K("s3://pinned/a", 0));
  PutOk(*store, K("s3://pinned/a", 1));
  for (int i = 0; i < 50; ++i) PutOk(*store, K("s3://flood/" + std::to_string(i)));
  EXPECT_TRUE(store->Contains(K("s3://pinned/a", 0)));
  EXPECT_TRUE(store->Contains(K("s3://pinned/a", 1)));
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.pinned_bytes, 2 * kCharge);
  EXPECT_EQ(stats.evictions, 48u);
  EXPECT_EQ(stats.capacity_evictions, 48u);
  EXPECT_EQ(stats.quota_evictions, 0u);

  // Two more pinned pages take the last unpinned room; then nothing can be evicted.
  PutOk(*store, K("s3://pinned/b", 0));
  PutOk(*store, K("s3://pinned/b", 1));
  EXPECT_EQ(store->Stats().pinned_bytes, 4 * kCharge);
  Status full = store->Put(K("s3://flood/late"), "x");
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.ToString();
  EXPECT_NE(full.message().find("pinned"), std::string::npos) << full.ToString();
  EXPECT_EQ(store->Put(K("s3://pinned/c"), "x").code(), StatusCode::kResourceExhausted);
  stats = store->Stats();
  EXPECT_EQ(stats.pages, 4u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + 4 * kCharge);
  EXPECT_EQ(PageFiles(), 4u);
}

TEST_F(RulesTest, LowPriorityPagesAreEvictedBeforeNormalOnes) {
  rules_.Set("s3://scratch/", {.priority = Priority::kLow});
  auto store = Make(Options(4));
  // The normal pages are older: plain LRU would evict them first.
  PutOk(*store, K("s3://data/n0"));
  PutOk(*store, K("s3://data/n1"));
  PutOk(*store, K("s3://scratch/l0"));
  PutOk(*store, K("s3://scratch/l1"));
  PutOk(*store, K("s3://data/x"));
  EXPECT_FALSE(store->Contains(K("s3://scratch/l0")));
  EXPECT_TRUE(store->Contains(K("s3://data/n0")));
  PutOk(*store, K("s3://data/y"));
  EXPECT_FALSE(store->Contains(K("s3://scratch/l1")));
  EXPECT_TRUE(store->Contains(K("s3://data/n0")));
  PutOk(*store, K("s3://data/z"));  // No low page left: LRU among the normal ones.
  EXPECT_FALSE(store->Contains(K("s3://data/n0")));
  for (const char* kept : {"s3://data/n1", "s3://data/x", "s3://data/y", "s3://data/z"}) {
    EXPECT_TRUE(store->Contains(K(kept))) << kept;
  }
}

TEST_F(RulesTest, PutWithPriorityOverridesTheResolversPriorityOnly) {
  rules_.Set("s3://data/", {.group = 7, .pinned = false});
  auto store = Make(Options(3));
  auto put_low = [&](const PageKey& key) {
    std::string data = Bytes(key.page_index, 100);
    Status s = store->PutWithPriority(key, data, ChunkChecksums(data), Priority::kLow);
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  PutOk(*store, K("s3://data/read"));
  put_low(K("s3://data/written"));
  // Refused like Put: a page larger than the page size, a checksum count that does not match.
  std::string big(5000, 'x');
  EXPECT_EQ(
      store->PutWithPriority(K("s3://data/big"), big, ChunkChecksums(big), Priority::kLow).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(store->PutWithPriority(K("s3://data/sums"), "xy", {}, Priority::kLow).code(),
            StatusCode::kInvalidArgument);
  // The written page is newer, and still goes first; the resolver's group still applies.
  PutOk(*store, K("s3://data/a"));
  PutOk(*store, K("s3://data/b"));
  EXPECT_FALSE(store->Contains(K("s3://data/written")));
  EXPECT_TRUE(store->Contains(K("s3://data/read")));
  EXPECT_EQ(store->GroupBytes(7), 3 * kCharge);
  // Read back byte-exact while it was cached.
  put_low(K("s3://data/again"));
  auto reader = store->Open(K("s3://data/again"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::string back(100, '\0');
  ASSERT_TRUE((*reader)->ReadAt(0, back).ok());
  EXPECT_EQ(back, Bytes(0, 100));
}

TEST_F(RulesTest, ExpiredPagesAreNotServedAndAreSwept) {
  rules_.Set("s3://ttl/", {.expires_at_us = clock_.NowMicros() + 10 * kSecond});
  auto store = Make(Options(16));
  PutOk(*store, K("s3://ttl/a"));
  PutOk(*store, K("s3://ttl/b"));
  PutOk(*store, K("s3://ttl/c"));
  PutOk(*store, K("s3://keep/d"));
  clock_.Advance(std::chrono::seconds(9));
  EXPECT_TRUE(store->Open(K("s3://ttl/a")).ok());
  clock_.Advance(std::chrono::seconds(2));
  // Open and Contains treat an expired page as missing, and drop it on the spot.
  EXPECT_EQ(store->Open(K("s3://ttl/a")).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(store->Contains(K("s3://ttl/b")));
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.expired_pages, 2u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.pages, 2u);
  // The rest goes with the sweep (this call, or the background sweeper before it).
  store->SweepExpired();
  stats = store->Stats();
  EXPECT_EQ(stats.expired_pages, 3u);
  EXPECT_EQ(stats.pages, 1u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + kCharge);
  EXPECT_EQ(PageFiles(), 1u);
  EXPECT_TRUE(store->Contains(K("s3://keep/d")));
  EXPECT_EQ(store->SweepExpired(), 0u);

  // A page whose deadline has already passed is not written at all.
  EXPECT_TRUE(store->Put(K("s3://ttl/late"), "x").ok());
  EXPECT_FALSE(store->Contains(K("s3://ttl/late")));
  EXPECT_EQ(PageFiles(), 1u);
}

TEST_F(RulesTest, BackgroundSweeperDropsExpiredPagesWithoutBeingAsked) {
  rules_.Set("s3://ttl/", {.expires_at_us = clock_.NowMicros() + kSecond});
  auto store = Make(Options(16));
  for (int i = 0; i < 5; ++i) PutOk(*store, K("s3://ttl/x", i));
  PutOk(*store, K("s3://keep/y"));
  clock_.Advance(std::chrono::seconds(2));
  // The sweeper polls a FakeClock once a second of real time. It drops a page from the index
  // first and deletes its file after, outside the folder lock: wait for both.
  for (int i = 0; i < 1000 && (store->Stats().pages != 1 || PageFiles() != 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.pages, 1u);
  EXPECT_EQ(stats.expired_pages, 5u);
  EXPECT_EQ(PageFiles(), 1u);
}

TEST_F(RulesTest, ExpiredPagesMakeRoomBeforeAnyEviction) {
  rules_.Set("s3://ttl/", {.expires_at_us = clock_.NowMicros() + kSecond});
  auto store = Make(Options(4));
  PutOk(*store, K("s3://old/a"));  // The LRU victim if nothing had expired.
  PutOk(*store, K("s3://ttl/b"));
  PutOk(*store, K("s3://ttl/c"));
  PutOk(*store, K("s3://old/d"));
  clock_.Advance(std::chrono::seconds(2));
  PutOk(*store, K("s3://new/e"));
  PutOk(*store, K("s3://new/f"));
  EXPECT_TRUE(store->Contains(K("s3://old/a")));
  EXPECT_TRUE(store->Contains(K("s3://old/d")));
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.expired_pages, 2u);
}

TEST_F(RulesTest, ReattributeWithANewTtlExpiresExistingPages) {
  auto store = Make(Options(16));
  for (int i = 0; i < 3; ++i) PutOk(*store, K("s3://logs/x", i));
  PutOk(*store, K("s3://data/y"));
  rules_.Set("s3://logs/", {.expires_at_us = clock_.NowMicros() + kSecond});
  store->Reattribute();
  EXPECT_TRUE(store->Contains(K("s3://logs/x", 0)));
  clock_.Advance(std::chrono::seconds(2));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(store->Contains(K("s3://logs/x", i))) << i;
  EXPECT_TRUE(store->Contains(K("s3://data/y")));
  store->SweepExpired();
  EXPECT_EQ(store->Stats().expired_pages, 3u);
  EXPECT_EQ(PageFiles(), 1u);

  // A deadline already in the past: not served from the moment Reattribute returns, also for a
  // page whose hits no longer take the folder's mutex (its file is kept open, hit_index.h).
  ASSERT_TRUE(store->Open(K("s3://data/y")).ok());
  ASSERT_TRUE(store->Open(K("s3://data/y")).ok());
  rules_.Set("s3://data/", {.expires_at_us = clock_.NowMicros() - 1});
  store->Reattribute();
  EXPECT_EQ(store->Open(K("s3://data/y")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().pages, 0u);
}

TEST_F(RulesTest, ReattributeMovesPagesIntoAndOutOfPinned) {
  auto store = Make(Options(4));
  PutOk(*store, K("s3://model/w", 0));
  PutOk(*store, K("s3://model/w", 1));
  PutOk(*store, K("s3://data/a"));
  PutOk(*store, K("s3://data/b"));
  rules_.Set("s3://model/", {.pinned = true});
  store->Reattribute();
  EXPECT_EQ(store->Stats().pinned_bytes, 2 * kCharge);
  for (int i = 0; i < 6; ++i) PutOk(*store, K("s3://data/c" + std::to_string(i)));
  EXPECT_TRUE(store->Contains(K("s3://model/w", 0)));
  EXPECT_TRUE(store->Contains(K("s3://model/w", 1)));

  rules_.Clear("s3://model/");
  store->Reattribute();
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
  for (int i = 0; i < 4; ++i) PutOk(*store, K("s3://data/d" + std::to_string(i)));
  EXPECT_FALSE(store->Contains(K("s3://model/w", 0)));
  EXPECT_FALSE(store->Contains(K("s3://model/w", 1)));
}

TEST_F(RulesTest, GroupOverItsQuotaEvictsItsOwnPagesOnly) {
  rules_.Set("s3://a/", {.group = 1});
  rules_.Set("s3://b/", {.group = 2});
  auto store = Make(Options(100));
  store->SetGroupQuota(1, 3 * kCharge);
  PutOk(*store, K("s3://b/0"));  // Older than every page of group 1.
  PutOk(*store, K("s3://b/1"));
  for (int i = 0; i < 6; ++i) PutOk(*store, K("s3://a/x", i));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(store->Contains(K("s3://a/x", i))) << i;
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(store->Contains(K("s3://a/x", i))) << i;
  EXPECT_TRUE(store->Contains(K("s3://b/0")));
  EXPECT_TRUE(store->Contains(K("s3://b/1")));
  EXPECT_EQ(store->GroupBytes(1), 3 * kCharge);
  EXPECT_EQ(store->GroupBytes(2), 2 * kCharge);
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.quota_evictions, 3u);
  EXPECT_EQ(stats.capacity_evictions, 0u);
  EXPECT_EQ(stats.evictions, 3u);

  // Quota removed: the group grows again.
  store->SetGroupQuota(1, 0);
  PutOk(*store, K("s3://a/y"));
  EXPECT_EQ(store->GroupBytes(1), 4 * kCharge);
}

TEST_F(RulesTest, GroupAtItsQuotaWithOnlyPinnedPagesRefusesPuts) {
  rules_.Set("s3://a/", {.group = 1, .pinned = true});
  rules_.Set("s3://a/loose/", {.group = 1});
  auto store = Make(Options(100));
  store->SetGroupQuota(1, 2 * kCharge);
  PutOk(*store, K("s3://a/p", 0));
  PutOk(*store, K("s3://a/p", 1));
  Status s = store->Put(K("s3://a/loose/q"), "x");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("quota"), std::string::npos) << s.ToString();
  PutOk(*store, K("s3://other/r"));  // Other groups are not affected.
  EXPECT_EQ(store->Stats().evictions, 0u);
}

TEST_F(RulesTest, QuotaIsSplitOverFoldersByCapacity) {
  rules_.Set("s3://a/", {.group = 1});
  ASSERT_TRUE(disk_->CreateDir("/d").ok());
  const uint64_t big = kSkeleton + 1000 * kCharge;
  const uint64_t small = kSkeleton + 100 * kCharge;
  PageStoreOptions options = Options(0);
  options.dirs = {{"/d/big", big}, {"/d/small", small}};
  auto store = Make(options);
  const uint64_t quota = 30 * kCharge;
  store->SetGroupQuota(1, quota);
  for (int i = 0; i < 400; ++i) PutOk(*store, K("s3://a/x" + std::to_string(i)));
  // Each folder holds the whole pages that fit in its share (about 5/6 and 1/6 of the quota).
  const uint64_t big_pages = quota * big / (big + small) / kCharge;
  const uint64_t small_pages = quota * small / (big + small) / kCharge;
  ASSERT_GT(big_pages, small_pages * 3);
  std::map<std::string, uint64_t> per_dir;
  for (const std::string& f : disk_->ListAllFiles()) {
    if (f.find("/v1/") != std::string::npos) ++per_dir[f.substr(0, f.find("/v1/"))];
  }
  EXPECT_EQ(per_dir["/d/big"], big_pages);
  EXPECT_EQ(per_dir["/d/small"], small_pages);
  EXPECT_EQ(store->GroupBytes(1), (big_pages + small_pages) * kCharge);
  EXPECT_EQ(store->Stats().quota_evictions, 400 - big_pages - small_pages);
}

TEST_F(RulesTest, SetAttributeResolverAppliesToNewPagesAndReattribute) {
  auto store = Make(Options(16));
  PutOk(*store, K("s3://m/a"));
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
  store->SetAttributeResolver([](std::string_view) { return EntryHints{.pinned = true}; });
  PutOk(*store, K("s3://m/b"));
  EXPECT_EQ(store->Stats().pinned_bytes, kCharge);
  store->Reattribute();
  EXPECT_EQ(store->Stats().pinned_bytes, 2 * kCharge);
  store->SetAttributeResolver(nullptr);  // Default hints from now on.
  store->Reattribute();
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
}

TEST_F(RulesTest, PutRacingWithReattributeEndsUnderTheNewRules) {
  auto held = std::make_shared<FaultInjectingDisk>(disk_);
  PageStoreOptions options = Options(8);
  options.disk = held;
  auto store = Make(options);
  auto write = std::make_shared<Gate>();
  held->Hold(DiskOp::kWriteNewFile, write);
  std::thread writer([&] { PutOk(*store, K("s3://model/w")); });
  // Resolved under the old rules (not pinned), not indexed yet.
  ASSERT_TRUE(write->WaitForArrivals(1));
  rules_.Set("s3://model/", {.pinned = true});
  store->Reattribute();  // Walks past the page: it is not in the index yet.
  write->Open();
  writer.join();
  EXPECT_EQ(store->Stats().pinned_bytes, kCharge);
}

TEST_F(RulesTest, RemovalsAreCountedByReason) {
  auto store = Make(Options(16));
  for (int i = 0; i < 4; ++i) PutOk(*store, K("s3://r/x", i));
  EXPECT_TRUE(store->Remove(K("s3://r/x", 0), RemoveReason::kFreed).ok());
  EXPECT_TRUE(store->Remove(K("s3://r/x", 1), RemoveReason::kFreed).ok());
  EXPECT_TRUE(store->Remove(K("s3://r/x", 2), RemoveReason::kInvalidated).ok());
  EXPECT_TRUE(store->Remove(K("s3://r/x", 3), RemoveReason::kCorrupt).ok());
  EXPECT_EQ(store->Remove(K("s3://r/x", 3), RemoveReason::kFreed).code(), StatusCode::kNotFound);
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.freed_pages, 2u);
  EXPECT_EQ(stats.invalidated_pages, 1u);
  EXPECT_EQ(stats.corrupt_pages, 1u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.expired_pages, 0u);
  EXPECT_EQ(stats.pages, 0u);
}

TEST_F(RulesTest, RecoveryAppliesTheResolverToPagesFoundOnDisk) {
  rules_.Set("s3://pinned/", {.pinned = true});
  rules_.Set("s3://g7/", {.group = 7});
  {
    auto store = Make(Options(4));
    PutOk(*store, K("s3://pinned/a", 0));
    PutOk(*store, K("s3://pinned/a", 1));
    PutOk(*store, K("s3://g7/b"));
  }
  {
    auto store = Make(Options(4));
    PageStoreStats stats = store->Stats();
    EXPECT_EQ(stats.recovered_pages, 3u);
    EXPECT_EQ(stats.pinned_bytes, 2 * kCharge);
    EXPECT_EQ(store->GroupBytes(7), kCharge);
    for (int i = 0; i < 20; ++i) PutOk(*store, K("s3://flood/" + std::to_string(i)));
    EXPECT_TRUE(store->Contains(K("s3://pinned/a", 0)));
    EXPECT_TRUE(store->Contains(K("s3://pinned/a", 1)));
    EXPECT_FALSE(store->Contains(K("s3://g7/b")));
  }
  // The hints are not stored with the pages: a restart under other rules applies those.
  rules_.Clear("s3://pinned/");
  auto store = Make(Options(4));
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
  for (int i = 0; i < 20; ++i) PutOk(*store, K("s3://flood2/" + std::to_string(i)));
  EXPECT_FALSE(store->Contains(K("s3://pinned/a", 0)));
}

TEST_F(RulesTest, PagesAdoptedByNameDuringRecoveryGetTheirHints) {
  rules_.Set("s3://pinned/", {.pinned = true});
  {
    auto store = Make(Options(8));
    PutOk(*store, K("s3://pinned/a"));
    PutOk(*store, K("s3://plain/b"));
  }
  auto gated = std::make_shared<FaultInjectingDisk>(disk_);
  auto listings = std::make_shared<Gate>();  // Listings are taken, then held until opened.
  gated->Hold(DiskOp::kListDir, listings, FaultInjectingDisk::When::kAfter);
  PageStoreOptions options = Options(8);
  options.disk = gated;
  auto created = PageStore::Create(options);
  ASSERT_TRUE(created.ok());
  auto store = std::move(created).value();
  EXPECT_TRUE(store->Contains(K("s3://pinned/a")));  // Probed by name and adopted.
  EXPECT_TRUE(store->Open(K("s3://plain/b")).ok());
  PageStoreStats stats = store->Stats();
  EXPECT_TRUE(stats.recovering);
  EXPECT_EQ(stats.pinned_bytes, kCharge);
  listings->Open();
  ASSERT_TRUE(testing::WaitForRecovery(*store));
  stats = store->Stats();
  EXPECT_EQ(stats.pinned_bytes, kCharge);
  EXPECT_EQ(stats.pages, 2u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + 2 * kCharge);
}

TEST_F(RulesTest, UnreadableHeaderAtStartupGetsItsHintsWhenFirstOpened) {
  rules_.Set("s3://pinned/", {.pinned = true});
  {
    auto store = Make(Options(8));
    PutOk(*store, K("s3://pinned/a"));
  }
  // Fails the first read of the page file (the scan's header read), then reads work again.
  auto flaky = std::make_shared<FaultInjectingDisk>(disk_);
  flaky->FailNext(DiskOp::kOpenForRead, IoError("injected read failure"), 1);
  PageStoreOptions options = Options(8);
  options.disk = flaky;
  auto store = Make(options);
  EXPECT_EQ(store->Stats().recovered_pages, 1u);
  EXPECT_EQ(store->Stats().pinned_bytes, 0u);
  EXPECT_TRUE(store->Open(K("s3://pinned/a")).ok());
  EXPECT_EQ(store->Stats().pinned_bytes, kCharge);
}

TEST_F(RulesTest, RulesChangedDuringTheScanApplyToPagesItIndexesLater) {
  // Two pages of one object in one sub-folder: the scan resolves the object once (at the first
  // header) and indexes both after the second header.
  std::map<int, uint64_t> first_in_subdir;
  std::vector<uint64_t> pages;
  for (uint64_t i = 0; pages.empty(); ++i) {
    auto [it, fresh] =
        first_in_subdir.try_emplace(DirLayout::SubdirOf(K("s3://model/w", i).Id()), i);
    if (!fresh) pages = {it->second, i};
  }
  {
    auto store = Make(Options(8));
    for (uint64_t p : pages) PutOk(*store, K("s3://model/w", p));
  }
  // The second OpenForRead (the scan's second header read) waits until the test opens.
  auto held = std::make_shared<FaultInjectingDisk>(disk_);
  auto second_read = std::make_shared<Gate>();
  held->Hold(DiskOp::kOpenForRead, second_read, FaultInjectingDisk::When::kBefore, 1, 1);
  PageStoreOptions options = Options(8);
  options.disk = held;
  options.recovery_threads_per_dir = 1;
  auto created = PageStore::Create(options);
  ASSERT_TRUE(created.ok());
  auto store = std::move(created).value();
  // The object was resolved under the old rules (not pinned).
  ASSERT_TRUE(second_read->WaitForArrivals(1));
  rules_.Set("s3://model/", {.pinned = true});
  store->Reattribute();  // The index is still empty.
  second_read->Open();
  ASSERT_TRUE(testing::WaitForRecovery(*store));
  EXPECT_EQ(store->Stats().recovered_pages, 2u);
  EXPECT_EQ(store->Stats().pinned_bytes, 2 * kCharge);
}

TEST(ObjectIdInternerTest, SharesOneStringPerObjectAndForgetsDeadOnes) {
  ObjectIdInterner interner;
  auto a = interner.Intern("s3://bucket/a");
  auto a2 = interner.Intern("s3://bucket/a");
  auto b = interner.Intern("s3://bucket/b");
  EXPECT_EQ(a.get(), a2.get());
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(*b, "s3://bucket/b");
  for (int i = 0; i < 5000; ++i) interner.Intern("s3://bucket/tmp-" + std::to_string(i));
  // Dead slots are purged as the table grows: it stays within a small multiple of the live ids.
  EXPECT_LE(interner.table_size(), 2100u);
  EXPECT_EQ(interner.Intern("s3://bucket/a").get(), a.get());
  EXPECT_EQ(ObjectIdOfKey(K("s3://x/y", 3).Serialize()), "s3://x/y");
}

// Writers, readers, rule changes, quota changes and sweeps at once: pinned pages are never lost,
// and the accounting ends equal to what is on the disk.
TEST_F(RulesTest, ConcurrentRulesChangesKeepPinsAndAccountingExact) {
  rules_.Set("s3://pinned/", {.pinned = true});
  rules_.Set("s3://g1/", {.group = 1});
  rules_.Set("s3://low/", {.group = 2, .priority = Priority::kLow});
  auto store = Make(Options(30));
  for (int i = 0; i < 5; ++i) PutOk(*store, K("s3://pinned/p", i));
  store->SetGroupQuota(1, 8 * kCharge);
  std::atomic<bool> done{false};
  std::thread changer([&] {
    for (int round = 0; !done; ++round) {
      rules_.Set("s3://low/", {.group = 2,
                               .priority = Priority::kLow,
                               .expires_at_us = clock_.NowMicros() + (round % 3) * kSecond});
      store->Reattribute();
      store->SetGroupQuota(1, (4 + round % 8) * kCharge);
      clock_.Advance(std::chrono::milliseconds(300));
      store->SweepExpired();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 6; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(t);
      const char* prefixes[] = {"s3://g1/", "s3://low/", "s3://plain/"};
      for (int i = 0; i < 300; ++i) {
        PageKey key = K(prefixes[rng() % 3] + std::to_string(rng() % 40));
        if (rng() % 3 == 0) {
          if (auto r = store->Open(key); r.ok()) {
            EXPECT_EQ(testing::ReadAll(**r), Bytes(0, 100));
          }
        } else {
          Status s = store->Put(key, Bytes(0, 100));
          EXPECT_TRUE(s.ok()) << s.ToString();
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  changer.join();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(store->Contains(K("s3://pinned/p", i))) << i;
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.pinned_bytes, 5 * kCharge);
  EXPECT_EQ(stats.pages, PageFiles());
  EXPECT_EQ(stats.used_bytes, kSkeleton + stats.pages * kCharge);
  EXPECT_LE(stats.used_bytes, kSkeleton + 30 * kCharge);
  EXPECT_GT(stats.quota_evictions, 0u);
  EXPECT_GT(stats.capacity_evictions, 0u);
  EXPECT_EQ(stats.evictions, stats.quota_evictions + stats.capacity_evictions);
}

TEST_F(RulesTest, EvictionListenerHearsEvictionsAndExpiriesWithTheirObjectAndReason) {
  std::mutex mu;
  std::vector<std::tuple<std::string, uint64_t, EvictionReason>> heard;
  PageStoreOptions o = Options(3);
  o.on_evict = [&](std::string_view object_id, uint64_t bytes, EvictionReason reason) {
    std::lock_guard<std::mutex> l(mu);
    heard.emplace_back(std::string(object_id), bytes, reason);
  };
  rules_.Set("s3://short/", {.expires_at_us = clock_.NowMicros() + kSecond});
  auto store = Make(o);
  PutOk(*store, K("s3://data/a"));
  PutOk(*store, K("s3://data/b"));
  PutOk(*store, K("s3://data/c"));
  PutOk(*store, K("s3://data/d"));  // Evicts a (least recently used).
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(heard.size(), 1u);
    EXPECT_EQ(std::get<0>(heard[0]), "s3://data/a");
    EXPECT_EQ(std::get<1>(heard[0]), kCharge);
    EXPECT_EQ(std::get<2>(heard[0]), EvictionReason::kCapacity);
  }
  PutOk(*store, K("s3://short/t"));  // Evicts b; expires after 1 s.
  clock_.SleepForMicros(2 * kSecond);
  EXPECT_FALSE(store->Contains(K("s3://short/t")));  // Expired: dropped and reported.
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(heard.size(), 3u);
  EXPECT_EQ(std::get<0>(heard[1]), "s3://data/b");
  EXPECT_EQ(std::get<0>(heard[2]), "s3://short/t");
  EXPECT_EQ(std::get<2>(heard[2]), EvictionReason::kExpired);
}

}  // namespace
}  // namespace cairn::pagestore
