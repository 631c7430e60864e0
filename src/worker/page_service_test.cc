#include "worker/page_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "common/checksum.h"
#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"

namespace cairn::worker {
namespace {

constexpr uint32_t kPage = 256 * 1024;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

class PageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cairn-ps-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    faults_ = std::make_shared<ufs::FaultInjectingUnderStorage>(memory_, 42);
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    mounts_ = *mount::MountTable::CreateWith({spec}, {faults_});
    pagestore::PageStoreOptions so;
    so.dirs.push_back({dir_.string(), 64ull << 20});
    so.page_size = kPage;
    store_ = std::move(pagestore::PageStore::Create(so)).value();
    PageServiceOptions po;
    po.page_size = kPage;
    service_ = std::make_unique<PageService>(mounts_, store_.get(), &registry_, po);
  }
  void TearDown() override {
    service_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  protocol::ReadPageRequest Request(const std::string& key, uint64_t page, uint32_t offset,
                                    uint32_t length) {
    auto info = memory_->Stat(key);
    EXPECT_TRUE(info.ok());
    protocol::ReadPageRequest r;
    r.page_size = kPage;
    r.mount = "/lake";
    r.key = key;
    r.version = info->version;
    r.object_size = info->size;
    r.page_index = page;
    r.offset = offset;
    r.length = length;
    return r;
  }

  // Waits for the page to be in the store and its fetch retired (until then a request joins
  // the fetch in flight rather than reading the store).
  void WaitCached(const pagestore::PageKey& key) {
    for (int i = 0; i < 1000 && !(store_->Contains(key) && service_->FetchesInFlight() == 0);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(store_->Contains(key));
    ASSERT_EQ(service_->FetchesInFlight(), 0u);
  }

  std::string ReadBytes(const protocol::ReadPageRequest& r, protocol::PageSource* source) {
    auto result = service_->ReadPage(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return "";
    std::string out(result->range.size(), '\0');
    EXPECT_TRUE(result->CopyTo(out).ok());
    EXPECT_EQ(ChunkChecksums(out), result->checksums);
    if (source) *source = result->source;
    return out;
  }

  std::filesystem::path dir_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::FaultInjectingUnderStorage> faults_;
  std::shared_ptr<const mount::MountTable> mounts_;
  std::unique_ptr<pagestore::PageStore> store_;
  metrics::Registry registry_;
  std::unique_ptr<PageService> service_;
};

TEST_F(PageServiceTest, MissThenHitServesTheSameBytes) {
  std::string data = RandomBytes(kPage * 2 + 1000, 1);
  memory_->Put("a/b.bin", data);
  protocol::PageSource source;
  std::string first = ReadBytes(Request("a/b.bin", 1, 0, kPage), &source);
  EXPECT_EQ(source, protocol::PageSource::kUnderStorage);
  EXPECT_EQ(first, data.substr(kPage, kPage));
  // Once the background write is done, the page must come from the cache.
  WaitCached({"mem://lake/a/b.bin", memory_->Stat("a/b.bin")->version, 1});
  uint64_t reads_before = faults_->calls(ufs::UfsOp::kRead);
  std::string second = ReadBytes(Request("a/b.bin", 1, 70000, 100), &source);
  EXPECT_EQ(source, protocol::PageSource::kCache);
  EXPECT_EQ(second, data.substr(kPage + 65536, 65536));
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kRead), reads_before);
  // The short last page.
  EXPECT_EQ(ReadBytes(Request("a/b.bin", 2, 0, 1000), nullptr), data.substr(2 * kPage));
  EXPECT_EQ(service_->Stats().hits, 1u);
}

TEST_F(PageServiceTest, ConcurrentMissesCoalesceIntoOneFetch) {
  memory_->Put("big", RandomBytes(kPage, 2));
  ufs::FaultSpec slow;
  slow.latency_us = 100000;
  faults_->SetFault(ufs::UfsOp::kRead, slow);
  auto request = Request("big", 0, 0, kPage);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (service_->ReadPage(request).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(faults_->calls(ufs::UfsOp::kRead), 1u);
}

TEST_F(PageServiceTest, ChangedObjectIsNeverServedFromOldVersion) {
  memory_->Put("obj", RandomBytes(1000, 3));
  auto old_request = Request("obj", 0, 0, 1000);
  ASSERT_TRUE(service_->ReadPage(old_request).ok());
  memory_->Put("obj", RandomBytes(1000, 4));
  auto new_request = Request("obj", 0, 0, 1000);
  EXPECT_NE(new_request.version, old_request.version);
  std::string fresh = ReadBytes(new_request, nullptr);
  EXPECT_EQ(fresh, *memory_->Get("obj"));
  // Asking for the old version once it left the source: FailedPrecondition, not wrong bytes
  // (unless the old version's page is still cached, which is then the old version's bytes).
  pagestore::PageKey old_key{"mem://lake/obj", old_request.version, 0};
  WaitCached(old_key);
  ASSERT_TRUE(store_->Remove(old_key, pagestore::RemoveReason::kInvalidated).ok());
  auto stale = service_->ReadPage(old_request);
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(PageServiceTest, RejectsBadRequests) {
  memory_->Put("x", "12345");
  auto r = Request("x", 0, 0, 5);
  r.page_size = kPage * 2;
  EXPECT_EQ(service_->ReadPage(r).status().code(), StatusCode::kInvalidArgument);
  r = Request("x", 0, 0, 5);
  r.mount = "/nope";  // Unknown mount: maybe not seen yet here, so the client goes elsewhere.
  EXPECT_EQ(service_->ReadPage(r).status().code(), StatusCode::kUnavailable);
  r = Request("x", 0, 0, 5);
  r.offset = 10;
  EXPECT_EQ(service_->ReadPage(r).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(PageServiceTest, UfsFailureIsReportedAndNotCached) {
  memory_->Put("f", RandomBytes(5000, 5));
  faults_->FailNext(ufs::UfsOp::kRead, 1);
  auto r = Request("f", 0, 0, 5000);
  EXPECT_EQ(service_->ReadPage(r).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(service_->ReadPage(r).ok());
}

}  // namespace
}  // namespace cairn::worker

namespace cairn::worker {
namespace {

TEST_F(PageServiceTest, SwappedMountTableServesNewMountsAndDropsOldOnes) {
  memory_->Put("x", "12345");
  auto r = Request("x", 0, 0, 5);
  r.mount = "/moved";
  EXPECT_EQ(service_->ReadPage(r).status().code(), StatusCode::kUnavailable);
  MountSpec spec;
  spec.path = "/moved";
  spec.uri = "mem://lake";
  service_->SetMountTable(*mount::MountTable::CreateWith({spec}, {memory_}));
  auto page = service_->ReadPage(r);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::string out(page->range.size(), '\0');
  ASSERT_TRUE(page->CopyTo(out).ok());
  EXPECT_EQ(out.substr(0, 5), "12345");
  r.mount = "/lake";  // Gone from the new table.
  EXPECT_EQ(service_->ReadPage(r).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cairn::worker
