// Restart: the startup scan, serving while it runs, capacity while it runs, crash leftovers, and
// a real kill -9 in the middle of writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "pagestore/cache_dir.h"
#include "pagestore/layout.h"
#include "pagestore/mem_disk.h"
#include "pagestore/page_store.h"
#include "pagestore/test_util.h"
#include "testing/fault_injecting_disk.h"

namespace cairn::pagestore {
namespace {

using cairn::testing::DiskOp;
using cairn::testing::FaultInjectingDisk;
using cairn::testing::Gate;

namespace fs = std::filesystem;
using testing::Bytes;
using testing::DiskUsage;
using testing::Key;
using testing::ReadAll;
using testing::TempDir;
using testing::WaitForRecovery;

constexpr uint64_t kSkeleton = CacheDir::kSkeletonBytes;
constexpr uint64_t kSmallCharge = 2 * 4096 + CacheDir::kDirEntryCharge;

std::unique_ptr<PageStore> Create(const PageStoreOptions& options) {
  auto store = PageStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

PageStoreOptions Options(const std::string& root, uint64_t capacity,
                         std::shared_ptr<Disk> disk = nullptr) {
  PageStoreOptions o;
  o.dirs = {{root, capacity}};
  o.page_size = 4096;
  o.disk = std::move(disk);
  return o;
}

// 20k pages on the real disk; the restarted store serves them while its scan is held in the
// middle, and all of them once it finished, with the accounting rebuilt exactly.
TEST(RecoveryTest, ServesHitsDuringAndAfterTheScan) {
  constexpr int kPages = 20000;
  TempDir tmp;
  const std::string root = tmp.str() + "/cache";
  const uint64_t capacity = kSkeleton + kPages * kSmallCharge + (1 << 20);
  {
    auto store = Create(Options(root, capacity));
    for (int i = 0; i < kPages; ++i) ASSERT_TRUE(store->Put(Key(i), Bytes(i, 16)).ok()) << i;
    ASSERT_EQ(store->Stats().pages, uint64_t{kPages});
  }
  auto gated = std::make_shared<FaultInjectingDisk>(PosixDisk());
  auto listings = std::make_shared<Gate>();  // Listings are taken, then held until opened.
  gated->Hold(DiskOp::kListDir, listings, FaultInjectingDisk::When::kAfter);
  auto store = Create(Options(root, capacity, gated));
  ASSERT_TRUE(store->Stats().recovering);
  for (int i = 0; i < kPages; i += 97) {
    auto reader = store->Open(Key(i));
    ASSERT_TRUE(reader.ok()) << i << ": " << reader.status().ToString();
    EXPECT_EQ(ReadAll(**reader), Bytes(i, 16));
  }
  EXPECT_FALSE(store->Contains(Key(kPages + 1)));
  EXPECT_TRUE(store->Contains(Key(1)));
  PageStoreStats during = store->Stats();
  EXPECT_TRUE(during.recovering);
  EXPECT_EQ(during.recovered_pages, uint64_t{kPages / 97 + 1 + 1});

  listings->Open();
  ASSERT_TRUE(WaitForRecovery(*store));
  PageStoreStats after = store->Stats();
  EXPECT_EQ(after.recovered_pages, uint64_t{kPages});
  EXPECT_EQ(after.pages, uint64_t{kPages});
  EXPECT_EQ(after.used_bytes, kSkeleton + kPages * kSmallCharge);
  EXPECT_EQ(after.evictions, 0u);
  EXPECT_EQ(after.corrupt_pages, 0u);
  for (int i = 0; i < kPages; ++i) {
    auto reader = store->Open(Key(i));
    ASSERT_TRUE(reader.ok()) << i << ": " << reader.status().ToString();
    ASSERT_EQ(ReadAll(**reader), Bytes(i, 16));
  }
}

// Writes while the scan knows nothing yet: the folder never holds more than its capacity.
TEST(RecoveryTest, CapacityHoldsWhileTheScanRuns) {
  auto disk = std::make_shared<MemDisk>();
  const uint64_t capacity = kSkeleton + 50 * kSmallCharge;
  {
    auto store = Create(Options("/cache", capacity, disk));
    ASSERT_TRUE(WaitForRecovery(*store));
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(store->Put(Key(i), Bytes(i, 100)).ok());
    ASSERT_EQ(store->Stats().evictions, 0u);
  }
  auto gated = std::make_shared<FaultInjectingDisk>(disk);
  auto listings = std::make_shared<Gate>();  // Listings are taken, then held until opened.
  gated->Hold(DiskOp::kListDir, listings, FaultInjectingDisk::When::kAfter);
  auto store = Create(Options("/cache", capacity, gated));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> worst{0};
  std::thread monitor([&] {
    while (!done) {
      // MemDisk snapshots atomically; "/" itself is not part of the folder.
      worst = std::max(worst.load(), *disk->FileSystemUsedBytes("/") - 4096);
    }
  });
  std::thread writer([&] {
    for (int i = 100; i < 130; ++i) EXPECT_TRUE(store->Put(Key(i), Bytes(i, 100)).ok()) << i;
  });
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(store->Open(Key(i)).ok()) << i;  // Probed, adopted.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Let the writer run gated.
  listings->Open();
  writer.join();
  ASSERT_TRUE(WaitForRecovery(*store));
  done = true;
  monitor.join();
  EXPECT_LE(worst.load(), capacity);
  for (int i = 100; i < 130; ++i) EXPECT_TRUE(store->Contains(Key(i))) << i;
  PageStoreStats stats = store->Stats();
  EXPECT_LE(stats.used_bytes, capacity);
  EXPECT_EQ(stats.pages, disk->ListAllFiles().size() - 1);  // - LOCK
  EXPECT_EQ(stats.used_bytes, kSkeleton + stats.pages * kSmallCharge);
}

TEST(RecoveryTest, LoweredCapacityEvictsDownAfterTheScan) {
  auto disk = std::make_shared<MemDisk>();
  {
    auto store = Create(Options("/cache", kSkeleton + 40 * kSmallCharge, disk));
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(store->Put(Key(i), std::string("x")).ok());
  }
  auto store = Create(Options("/cache", kSkeleton + 10 * kSmallCharge, disk));
  ASSERT_TRUE(WaitForRecovery(*store));
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.pages, 10u);
  EXPECT_EQ(stats.evictions, 30u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + 10 * kSmallCharge);
  EXPECT_EQ(disk->ListAllFiles().size(), 10u + 1);
}

// A page removed (or evicted) while its folder's listing is held must not come back when the
// scan processes that stale listing.
TEST(RecoveryTest, PagesDroppedDuringTheScanStayDropped) {
  auto disk = std::make_shared<MemDisk>();
  {
    auto store = Create(Options("/cache", 8 << 20, disk));
    for (int i = 0; i < 300; ++i) ASSERT_TRUE(store->Put(Key(i), Bytes(i, 10)).ok());
  }
  auto gated = std::make_shared<FaultInjectingDisk>(disk);
  auto listings = std::make_shared<Gate>();  // Listings are taken, then held until opened.
  gated->Hold(DiskOp::kListDir, listings, FaultInjectingDisk::When::kAfter);
  auto store = Create(Options("/cache", 8 << 20, gated));
  // Give the scanners time to take their first listings, then drop pages everywhere.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 300; i += 2) {
    EXPECT_TRUE(store->Remove(Key(i), RemoveReason::kInvalidated).ok()) << i;
  }
  listings->Open();
  ASSERT_TRUE(WaitForRecovery(*store));
  for (int i = 0; i < 300; ++i) EXPECT_EQ(store->Contains(Key(i)), i % 2 == 1) << i;
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.pages, 150u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + 150 * kSmallCharge);
  EXPECT_EQ(disk->ListAllFiles().size(), 150u + 1);
}

TEST(RecoveryTest, DamagedFileIsIndexedCheaplyThenDroppedOnFirstOpen) {
  auto disk = std::make_shared<MemDisk>();
  DirLayout layout("/cache");
  {
    auto store = Create(Options("/cache", 8 << 20, disk));
    ASSERT_TRUE(store->Put(Key(1), std::string("one")).ok());
    ASSERT_TRUE(store->Put(Key(2), std::string("two")).ok());
  }
  std::string file = *disk->ReadFile(layout.PagePath(Key(2).Id()));
  ASSERT_TRUE(disk->PutFile(layout.PagePath(Key(2).Id()), file.substr(0, 4097)).ok());
  auto store = Create(Options("/cache", 8 << 20, disk));
  ASSERT_TRUE(WaitForRecovery(*store));
  EXPECT_EQ(store->Stats().recovered_pages, 2u);
  EXPECT_EQ(store->Open(Key(2)).status().code(), StatusCode::kCorruption);
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.corrupt_pages, 1u);
  EXPECT_EQ(stats.pages, 1u);
  EXPECT_EQ(stats.used_bytes, kSkeleton + kSmallCharge);
  EXPECT_TRUE(store->Open(Key(1)).ok());
}

TEST(RecoveryTest, LeftoversOfACrashAreRemovedAtStartup) {
  TempDir tmp;
  const std::string root = tmp.str() + "/cache";
  DirLayout layout(root);
  {
    auto store = Create(Options(root, 8 << 20));
    ASSERT_TRUE(store->Put(Key(1), std::string("kept")).ok());
  }
  Hash128 a{0x1200000000000000ULL, 1};
  Hash128 b{0xfe00000000000000ULL, 2};
  std::vector<std::string> leftovers = {
      layout.TempPath(a, 0xdeadbeefULL, 3),  // A write cut short by a crash.
      layout.TempPath(b, 0x1234ULL, 0),
      layout.SubdirPath(0x12) + "/notes.txt",     // Not ours, in our namespace.
      layout.SubdirPath(0x13) + "/" + a.ToHex(),  // A page name in the wrong folder.
  };
  for (const std::string& f : leftovers) {
    std::ofstream(f) << std::string(5000, 'z');
  }
  fs::create_directory(layout.SubdirPath(0x12) + "/unexpected");
  auto store = Create(Options(root, 8 << 20));
  ASSERT_TRUE(WaitForRecovery(*store));
  for (const std::string& f : leftovers) EXPECT_FALSE(fs::exists(f)) << f;
  EXPECT_TRUE(fs::exists(layout.SubdirPath(0x12) + "/unexpected")) << "folders are left alone";
  auto reader = store->Open(Key(1));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(**reader), "kept");
  EXPECT_EQ(store->Stats().pages, 1u);
}

// A child process writes pages from several threads and is killed with SIGKILL mid-stream.
// Every page it acknowledged is served intact (or was evicted: never damaged), no temp file
// survives the restart, and the folder is within its capacity.
TEST(RecoveryTest, SurvivesKillNineInTheMiddleOfWrites) {
  TempDir tmp;
  const std::string root = tmp.str() + "/cache";
  const uint64_t capacity = kSkeleton + 400 * kSmallCharge;
  int acks[2];
  ASSERT_EQ(::pipe(acks), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(acks[0]);
    auto store = PageStore::Create(Options(root, capacity));
    if (!store.ok()) ::_exit(2);
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t) {
      writers.emplace_back([&, t] {
        for (uint32_t i = t;; i += 4) {
          if (!(*store)->Put(Key(i), Bytes(i, 1 + i % 4000)).ok()) ::_exit(3);
          if (::write(acks[1], &i, sizeof(i)) != sizeof(i)) ::_exit(4);
        }
      });
    }
    for (auto& w : writers) w.join();
    ::_exit(0);
  }
  ::close(acks[1]);
  std::vector<uint32_t> acked;
  uint32_t i;
  while (acked.size() < 2000 && ::read(acks[0], &i, sizeof(i)) == sizeof(i)) acked.push_back(i);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(acks[0]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);
  ASSERT_EQ(acked.size(), 2000u);

  auto store = Create(Options(root, capacity));
  ASSERT_TRUE(WaitForRecovery(*store));
  int served = 0;
  for (uint32_t k : acked) {
    auto reader = store->Open(Key(k));
    if (reader.status().code() == StatusCode::kNotFound) continue;  // Evicted before the kill.
    ASSERT_TRUE(reader.ok()) << k << ": " << reader.status().ToString();
    ASSERT_TRUE(VerifyPage(**reader).ok()) << k;
    ASSERT_EQ(ReadAll(**reader), Bytes(k, 1 + k % 4000)) << k;
    ++served;
  }
  EXPECT_GE(served, 200) << "the newest acknowledged pages fit in the capacity";
  PageStoreStats stats = store->Stats();
  EXPECT_EQ(stats.corrupt_pages, 0u);
  EXPECT_LE(stats.used_bytes, capacity);
  EXPECT_LE(DiskUsage(root), stats.used_bytes);
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace cairn::pagestore
