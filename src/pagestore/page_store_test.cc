// PageStore behaviour on the in-memory disk: fast, hermetic, with injected faults.
#include "pagestore/page_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "pagestore/cache_dir.h"
#include "pagestore/layout.h"
#include "pagestore/mem_disk.h"
#include "pagestore/test_util.h"
#include "testing/fault_injecting_disk.h"

namespace cairn::pagestore {
namespace {

using cairn::testing::DiskOp;

using testing::Bytes;
using testing::Key;
using testing::ReadAll;

constexpr uint64_t kSkeleton = CacheDir::kSkeletonBytes;
// A page of up to 4096 data bytes with a short key: one header block + one data block + name.
constexpr uint64_t kSmallCharge = 2 * 4096 + CacheDir::kDirEntryCharge;

class MemStoreTest : public ::testing::Test {
 protected:
  PageStoreOptions Options(uint64_t capacity, uint32_t page_size = 4096) {
    PageStoreOptions o;
    o.dirs = {{"/cache", capacity}};
    o.page_size = page_size;
    o.disk = disk_;
    return o;
  }
  std::unique_ptr<PageStore> Make(const PageStoreOptions& options) {
    auto store = PageStore::Create(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    EXPECT_TRUE(testing::WaitForRecovery(**store));
    return std::move(store).value();
  }
  void PutOk(PageStore& store, const PageKey& key, const std::string& data) {
    Status s = store.Put(key, data);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<std::string> TempFiles() {
    std::vector<std::string> out;
    for (const std::string& f : disk_->ListAllFiles()) {
      if (f.find(".tmp-") != std::string::npos) out.push_back(f);
    }
    return out;
  }

  std::shared_ptr<MemDisk> disk_ = std::make_shared<MemDisk>();
};

TEST_F(MemStoreTest, PutThenOpenReturnsTheDataAndItsChecksums) {
  auto store = Make(Options(64 << 20, 1 << 20));
  std::string data = Bytes(1, 300000);
  PutOk(*store, Key(1), data);
  auto reader = store->Open(Key(1));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->data_length(), data.size());
  EXPECT_EQ((*reader)->chunk_checksums(), ChunkChecksums(data));
  EXPECT_EQ(ReadAll(**reader), data);
  EXPECT_TRUE(VerifyPage(**reader).ok());
  EXPECT_EQ((*reader)->native_fd(), -1);
  EXPECT_EQ((*reader)->data_file_offset() % 4096, 0u);
  std::string part(10, '\0');
  ASSERT_TRUE((*reader)->ReadAt(65530, part).ok());
  EXPECT_EQ(part, data.substr(65530, 10));
  EXPECT_EQ((*reader)->ReadAt(299999, part).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->Contains(Key(1)));
  EXPECT_FALSE(store->Contains(Key(2)));
  EXPECT_EQ(store->Open(Key(2)).status().code(), StatusCode::kNotFound);
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.pages, 1u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + CacheDir::ChargeForFile(4096 + 300000));
  EXPECT_EQ(stats.capacity_bytes, 64u << 20);
  EXPECT_FALSE(stats.recovering);
}

TEST_F(MemStoreTest, AnotherVersionOfTheObjectIsAMiss) {
  auto store = Make(Options(8 << 20));
  PutOk(*store, Key(1, "etag-old"), "old bytes");
  EXPECT_EQ(store->Open(Key(1, "etag-new")).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(store->Contains(Key(1, "etag-new")));
}

TEST_F(MemStoreTest, PutReplacesAndKeepsAccountingExact) {
  auto store = Make(Options(8 << 20));
  PutOk(*store, Key(1), std::string(100, 'a'));
  PutOk(*store, Key(1), std::string(3000, 'b'));
  auto reader = store->Open(Key(1));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(**reader), std::string(3000, 'b'));
  EXPECT_EQ(store->Stats().pages, 1u);
  EXPECT_EQ(store->Stats().used_bytes, kSkeleton + kSmallCharge);
}

TEST_F(MemStoreTest, RejectsBadPagesAndKeys) {
  auto store = Make(Options(8 << 20));
  EXPECT_EQ(store->Put(Key(1), std::string(4097, 'x')).code(), StatusCode::kInvalidArgument);
  PageKey nul{std::string("a\0b", 3), "v", 0};
  EXPECT_EQ(store->Put(nul, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Open(nul).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(store->Contains(nul));
  PageKey huge{std::string(kMaxSerializedKeyLength, 'k'), "v", 0};
  EXPECT_EQ(store->Put(huge, "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Stats().used_bytes, kSkeleton);
}

TEST_F(MemStoreTest, PageThatCanNeverFitIsResourceExhaustedWithoutEvicting) {
  auto store = Make(Options(kSkeleton + kSmallCharge));
  PutOk(*store, Key(1), "x");
  PageKey long_key{std::string(12000, 'k'), "v", 0};  // Its header alone takes 3 more blocks.
  EXPECT_EQ(store->Put(long_key, "x").code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(store->Contains(Key(1)));
  EXPECT_EQ(store->Stats().evictions, 0u);
}

// Capacity of four small pages. Hand-computed LRU trace:
//   put 0 1 2 3, open 0          order (old -> new): 1 2 3 0
//   put 4 -> evicts 1            2 3 0 4
//   put 5 -> evicts 2            3 0 4 5
//   open 3, put 6 -> evicts 0    4 5 3 6
TEST_F(MemStoreTest, EvictsLeastRecentlyUsedFirst) {
  auto store = Make(Options(kSkeleton + 4 * kSmallCharge + 100));
  for (int i = 0; i < 4; ++i) PutOk(*store, Key(i), Bytes(i, 1000));
  ASSERT_TRUE(store->Open(Key(0)).ok());
  PutOk(*store, Key(4), Bytes(4, 1000));
  EXPECT_FALSE(store->Contains(Key(1)));
  PutOk(*store, Key(5), Bytes(5, 1000));
  EXPECT_FALSE(store->Contains(Key(2)));
  ASSERT_TRUE(store->Open(Key(3)).ok());
  PutOk(*store, Key(6), Bytes(6, 1000));
  EXPECT_FALSE(store->Contains(Key(0)));
  for (int i : {3, 4, 5, 6}) EXPECT_TRUE(store->Contains(Key(i))) << i;
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.evictions, 3u);
  EXPECT_EQ(stats.pages, 4u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + 4 * kSmallCharge);
  // Evicted files are gone from disk too.
  EXPECT_EQ(disk_->ListAllFiles().size(), 4u + 1u);  // + LOCK
}

// Hits on pages whose files are kept open take no folder mutex (hit_index.h); the policy must
// still see them, in order, before it picks a victim.
TEST_F(MemStoreTest, HitsOnKeptOpenPagesRefreshRecency) {
  auto store = Make(Options(kSkeleton + 4 * kSmallCharge + 100));
  for (int i = 0; i < 4; ++i) PutOk(*store, Key(i), Bytes(i, 1000));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(store->Open(Key(i)).ok());  // Now kept open.
  ASSERT_TRUE(store->Open(Key(0)).ok());                              // Recency: 1 2 3 0.
  PutOk(*store, Key(4), Bytes(4, 1000));                              // Evicts 1: 2 3 0 4.
  EXPECT_FALSE(store->Contains(Key(1)));
  ASSERT_TRUE(store->Open(Key(2)).ok());  // 3 0 4 2.
  PutOk(*store, Key(5), Bytes(5, 1000));  // Evicts 3: 0 4 2 5.
  EXPECT_FALSE(store->Contains(Key(3)));
  for (int i : {0, 2, 4, 5}) EXPECT_TRUE(store->Contains(Key(i))) << i;
  // Many hits, more than one access log holds, on one page: it stays the most recent.
  for (int n = 0; n < 500; ++n) ASSERT_TRUE(store->Open(Key(0)).ok());
  PutOk(*store, Key(6), Bytes(6, 1000));  // 4 2 5 0: evicts 4.
  EXPECT_FALSE(store->Contains(Key(4)));
  EXPECT_TRUE(store->Contains(Key(0)));
  auto reader = store->Open(Key(0));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(**reader), Bytes(0, 1000));
}

TEST_F(MemStoreTest, ContainsDoesNotRefreshRecency) {
  auto store = Make(Options(kSkeleton + 2 * kSmallCharge));
  PutOk(*store, Key(0), "a");
  PutOk(*store, Key(1), "b");
  EXPECT_TRUE(store->Contains(Key(0)));
  PutOk(*store, Key(2), "c");
  EXPECT_FALSE(store->Contains(Key(0)));
  EXPECT_TRUE(store->Contains(Key(1)));
}

TEST_F(MemStoreTest, ReaderKeepsWorkingAfterItsPageIsEvictedOrRemoved) {
  auto store = Make(Options(kSkeleton + kSmallCharge));
  PutOk(*store, Key(0), "first page");
  auto reader = store->Open(Key(0));
  ASSERT_TRUE(reader.ok());
  PutOk(*store, Key(1), "second page");  // Evicts Key(0).
  EXPECT_FALSE(store->Contains(Key(0)));
  EXPECT_EQ(ReadAll(**reader), "first page");
  EXPECT_TRUE(VerifyPage(**reader).ok());
}

TEST_F(MemStoreTest, RemoveDropsAndCountsOnlyCorruption) {
  auto store = Make(Options(8 << 20));
  PutOk(*store, Key(0), "a");
  PutOk(*store, Key(1), "b");
  EXPECT_TRUE(store->Remove(Key(0), RemoveReason::kInvalidated).ok());
  EXPECT_EQ(store->Remove(Key(0), RemoveReason::kInvalidated).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().corrupt_pages, 0u);
  EXPECT_TRUE(store->Remove(Key(1), RemoveReason::kCorrupt).ok());
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.corrupt_pages, 1u);
  EXPECT_EQ(stats.pages, 0u);
  EXPECT_EQ(stats.used_bytes, kSkeleton);
  EXPECT_EQ(store->Open(Key(1)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(disk_->ListAllFiles(), std::vector<std::string>{"/cache/LOCK"});
}

// Two readers found one copy damaged and both report it: the first report drops it and a
// refetch stores a new copy; the second report must not drop the new copy.
TEST_F(MemStoreTest, RemoveCopyDropsOnlyTheCopyThatWasRead) {
  auto store = Make(Options(8 << 20));
  PutOk(*store, Key(0), "damaged copy");
  auto first = store->Open(Key(0));
  auto second = store->Open(Key(0));
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_NE((*first)->copy_id(), 0u);
  EXPECT_EQ((*first)->copy_id(), (*second)->copy_id());
  EXPECT_TRUE(store->RemoveCopy(Key(0), (*first)->copy_id(), RemoveReason::kCorrupt).ok());
  PutOk(*store, Key(0), "refetched copy");
  EXPECT_EQ(store->RemoveCopy(Key(0), (*second)->copy_id(), RemoveReason::kCorrupt).code(),
            StatusCode::kNotFound);
  auto now = store->Open(Key(0));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(ReadAll(**now), "refetched copy");
  EXPECT_NE((*now)->copy_id(), (*first)->copy_id());
  EXPECT_EQ(store->Stats().corrupt_pages, 1u);
  EXPECT_EQ(store->RemoveCopy(Key(0), 0, RemoveReason::kCorrupt).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store->RemoveCopy(Key(1), (*now)->copy_id(), RemoveReason::kCorrupt).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(store->Contains(Key(0)));
}

TEST_F(MemStoreTest, DamagedFilesAreCorruptionThenGone) {
  auto store = Make(Options(8 << 20));
  DirLayout layout("/cache");
  std::string a = Bytes(1, 3000);
  PutOk(*store, Key(1), a);
  PutOk(*store, Key(2), Bytes(2, 3000));
  PutOk(*store, Key(3), Bytes(3, 3000));
  std::string file_a = *disk_->ReadFile(layout.PagePath(Key(1).Id()));
  // Swapped: page 1's file under page 2's name. Truncated: page 3 loses a byte.
  ASSERT_TRUE(disk_->PutFile(layout.PagePath(Key(2).Id()), file_a).ok());
  std::string file_c = *disk_->ReadFile(layout.PagePath(Key(3).Id()));
  ASSERT_TRUE(disk_->PutFile(layout.PagePath(Key(3).Id()), file_c.substr(0, 5000)).ok());
  for (int i : {2, 3}) {
    EXPECT_EQ(store->Open(Key(i)).status().code(), StatusCode::kCorruption) << i;
    EXPECT_EQ(store->Open(Key(i)).status().code(), StatusCode::kNotFound) << i;
    EXPECT_EQ(disk_->ReadFile(layout.PagePath(Key(i).Id())).status().code(), StatusCode::kNotFound);
  }
  auto reader = store->Open(Key(1));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(**reader), a);
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.corrupt_pages, 2u);
  EXPECT_EQ(stats.pages, 1u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + kSmallCharge);
}

TEST_F(MemStoreTest, FailedWritesReleaseTheirReservationAndLeaveNoFile) {
  auto faulty = std::make_shared<cairn::testing::FaultInjectingDisk>(disk_);
  PageStoreOptions options = Options(8 << 20);
  options.disk = faulty;
  auto store = Make(options);
  PutOk(*store, Key(0), "kept");
  const uint64_t used = store->Stats().used_bytes;
  faulty->FailNext(DiskOp::kWriteNewFile, IoError("injected write failure"), -1);
  EXPECT_EQ(store->Put(Key(1), "lost").code(), StatusCode::kIoError);
  faulty->Clear(DiskOp::kWriteNewFile);
  faulty->FailNext(DiskOp::kRename, IoError("injected rename failure"), -1);
  EXPECT_EQ(store->Put(Key(2), "lost").code(), StatusCode::kIoError);
  EXPECT_EQ(store->Put(Key(0), "replacement").code(), StatusCode::kIoError);
  faulty->Clear(DiskOp::kRename);
  EXPECT_EQ(store->Stats().used_bytes, used);
  EXPECT_EQ(store->Stats().pages, 1u);
  EXPECT_TRUE(TempFiles().empty());
  EXPECT_FALSE(store->Contains(Key(1)));
  EXPECT_FALSE(store->Contains(Key(2)));
  auto reader = store->Open(Key(0));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(**reader), "kept");
}

TEST_F(MemStoreTest, CreateValidatesOptions) {
  PageStoreOptions none = Options(8 << 20);
  none.dirs.clear();
  EXPECT_EQ(PageStore::Create(none).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PageStore::Create(Options(kSkeleton + kSmallCharge - 1)).status().code(),
            StatusCode::kInvalidArgument);
  PageStoreOptions zero_page = Options(8 << 20);
  zero_page.page_size = 0;
  EXPECT_EQ(PageStore::Create(zero_page).status().code(), StatusCode::kInvalidArgument);
  PageStoreOptions twice = Options(8 << 20);
  twice.dirs.push_back({"/cache/", 8 << 20});
  EXPECT_EQ(PageStore::Create(twice).status().code(), StatusCode::kInvalidArgument);
  PageStoreOptions policy = Options(8 << 20);
  policy.eviction_policy = "random";
  auto bad = PageStore::Create(policy);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("lru"), std::string::npos);
  PageStoreOptions orphan = Options(8 << 20);
  orphan.dirs = {{"/no/such/parent", 8 << 20}};
  EXPECT_EQ(PageStore::Create(orphan).status().code(), StatusCode::kNotFound);
}

TEST_F(MemStoreTest, CreatesFoldersPrivateAndRefusesUnsafeRoots) {
  auto store = Make(Options(8 << 20));
  EXPECT_EQ(disk_->Stat("/cache")->mode, 0700u);
  EXPECT_EQ(disk_->Stat("/cache/v1")->mode, 0700u);
  EXPECT_EQ(disk_->Stat("/cache/v1/00")->mode, 0700u);
  EXPECT_EQ(disk_->Stat("/cache/v1/ff")->mode, 0700u);
  store.reset();
  ASSERT_TRUE(disk_->SetMode("/cache", 0777).ok());
  auto world = PageStore::Create(Options(8 << 20));
  EXPECT_EQ(world.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(world.status().message().find("world-writable"), std::string::npos);
  ASSERT_TRUE(disk_->SetMode("/cache", 0500).ok());
  EXPECT_EQ(PageStore::Create(Options(8 << 20)).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(MemStoreTest, OneStorePerFolder) {
  auto first = Make(Options(8 << 20));
  auto second = PageStore::Create(Options(8 << 20));
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  first.reset();
  EXPECT_TRUE(PageStore::Create(Options(8 << 20)).ok());
}

TEST_F(MemStoreTest, SpreadsPagesOverFoldersStablyAcrossRestarts) {
  ASSERT_TRUE(disk_->CreateDir("/d").ok());
  PageStoreOptions options = Options(0);
  options.dirs = {{"/d/a", 4 << 20}, {"/d/b", 4 << 20}, {"/d/c", 4 << 20}};
  std::map<std::string, int> per_dir;
  {
    auto store = Make(options);
    for (int i = 0; i < 150; ++i) PutOk(*store, Key(i), Bytes(i, 100));
    EXPECT_EQ(store->Stats().capacity_bytes, 12u << 20);
    EXPECT_EQ(store->Stats().pages, 150u);
    for (const std::string& f : disk_->ListAllFiles()) per_dir[f.substr(0, 4)]++;
  }
  for (const char* d : {"/d/a", "/d/b", "/d/c"}) EXPECT_GT(per_dir[d], 30) << d;
  auto store = Make(options);
  EXPECT_EQ(store->Stats().recovered_pages, 150u);
  for (int i = 0; i < 150; ++i) {
    auto reader = store->Open(Key(i));
    ASSERT_TRUE(reader.ok()) << i << " " << reader.status().ToString();
    EXPECT_EQ(ReadAll(**reader), Bytes(i, 100));
  }
}

// Many threads put, open and remove; capacity holds at every sample, and at the end the
// accounting equals what is on the disk.
TEST_F(MemStoreTest, ConcurrentUseKeepsCapacityAndAccountingExact) {
  const uint64_t capacity = kSkeleton + 40 * kSmallCharge;
  auto store = Make(Options(capacity));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> worst{0};
  std::thread monitor([&] {
    while (!done) {
      uint64_t used = store->Stats().used_bytes;
      uint64_t on_disk = *disk_->FileSystemUsedBytes("/");
      worst = std::max({worst.load(), used, on_disk - 4096 /* "/" itself */});
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 400; ++i) {
        int k = rng() % 120;
        switch (rng() % 4) {
          case 0:
          case 1:
            EXPECT_TRUE(store->Put(Key(k), Bytes(k, 100 + k * 30)).ok());
            break;
          case 2:
            if (auto r = store->Open(Key(k)); r.ok()) {
              EXPECT_EQ(ReadAll(**r), Bytes(k, 100 + k * 30));
            }
            break;
          case 3:
            store->Remove(Key(k), RemoveReason::kInvalidated).IgnoreError();
            break;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  monitor.join();
  EXPECT_LE(worst.load(), capacity);
  PageStoreStats stats = store->Stats();
  uint64_t expected = kSkeleton;
  uint64_t pages = 0;
  for (const std::string& f : disk_->ListAllFiles()) {
    if (f == "/cache/LOCK") continue;
    ASSERT_EQ(f.find(".tmp-"), std::string::npos) << f;
    expected += CacheDir::ChargeForFile(disk_->ReadFile(f)->size());
    ++pages;
  }
  EXPECT_EQ(stats.used_bytes, expected);
  EXPECT_EQ(stats.pages, pages);
  EXPECT_GT(stats.evictions, 0u);
}

}  // namespace
}  // namespace cairn::pagestore
