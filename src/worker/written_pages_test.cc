// Written pages into the cache: a file committed through worker "a" is cached under the version
// its commit made, on each page's replicas (a itself, or worker "b" copying from a), so that
// reading it back is a hit and costs no source read. Two PageServices joined by LocalChannels.
#include "worker/written_pages.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/checksum.h"
#include "policy/path_rules.h"
#include "testing/test_util.h"
#include "ufs/memory_ufs.h"
#include "worker/local_channel.h"
#include "worker/write_service.h"

namespace cairn::worker {
namespace {

constexpr uint32_t kPage = 64 * 1024;

// One worker: a store, its page service and its view of the peers.
struct Node {
  std::unique_ptr<pagestore::PageStore> store;
  std::unique_ptr<PeerSet> peers;
  metrics::Registry registry;
  std::unique_ptr<PageService> pages;
};

class WrittenPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    auto twice = std::make_shared<ufs::MemoryUnderStorage>("mem://twice");
    MountSpec lake;
    lake.path = "/lake";
    lake.uri = "mem://lake";
    lake.read_only = false;
    MountSpec replicated = lake;
    replicated.path = "/twice";
    replicated.uri = "mem://twice";
    replicated.replicas = 2;
    twice_ = twice;
    mounts_ = *mount::MountTable::CreateWith({lake, replicated}, {memory_, twice});
    rules_.SetMounts(mounts_);
  }

  // Starts workers "a" (the writer) and, if `cluster`, "b".
  void Start(bool cluster) {
    for (const char* id : {"a", "b"}) {
      if (!cluster && std::string(id) == "b") break;
      auto node = std::make_unique<Node>();
      pagestore::PageStoreOptions so;
      so.dirs.push_back({(dir_.path() / id).string(), 64ull << 20});
      so.page_size = kPage;
      node->store = std::move(pagestore::PageStore::Create(so)).value();
      PageServiceOptions po;
      po.page_size = kPage;
      po.worker_id = id;
      po.rules = &rules_;
      if (cluster) {
        node->peers = std::make_unique<PeerSet>(id, [this](const std::string& address) {
          return std::make_shared<LocalChannel>(address == "a:1" ? a().pages.get()
                                                                 : b().pages.get());
        });
        EXPECT_TRUE(node->peers->SetWorkers({{"a", "a:1", 1.0}, {"b", "b:1", 1.0}}).ok());
        po.peers = node->peers.get();
      }
      node->pages = std::make_unique<PageService>(mounts_, node->store.get(), &node->registry, po);
      nodes_.push_back(std::move(node));
    }
    WrittenPagesOptions wpo;
    wpo.registry = &a().registry;
    written_ = std::make_unique<WrittenPages>(a().pages.get(), wpo);
    WriteServiceOptions wo;
    wo.spool_dirs = {(dir_.path() / "spool").string()};
    wo.part_size = 64 << 10;
    wo.registry = &a().registry;
    wo.written_pages = written_.get();
    writes_ = std::move(WriteService::Create(a().pages.get(), wo)).value();
  }
  void TearDown() override {
    writes_.reset();
    written_.reset();
    nodes_.clear();
  }
  Node& a() { return *nodes_[0]; }
  const mount::Mount& MountAt(const std::string& path) {
    for (const auto& m : mounts_->mounts()) {
      if (m->spec.path == path) return *m;
    }
    ADD_FAILURE() << "no mount " << path;
    return *mounts_->mounts().front();
  }
  Node& b() { return *nodes_[1]; }

  // Writes `content` to `path` through worker a and closes it; returns the committed version.
  std::string WriteFile(const std::string& path, const std::string& content) {
    protocol::OpenWriteRequest open;
    open.path = path;
    open.create = true;
    open.truncate = true;
    auto opened = writes_->Serve("team-a", open);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return "";
    for (size_t at = 0; at < content.size(); at += 100'000) {
      protocol::WritePageRequest w;
      w.handle = opened->handle;
      w.offset = at;
      w.data = std::span<const char>(content).subspan(
          at, std::min<size_t>(100'000, content.size() - at));
      w.checksums = ChunkChecksums(w.data);
      EXPECT_TRUE(writes_->Serve("team-a", w).ok());
    }
    auto closed = writes_->Serve("team-a", protocol::CloseWriteRequest{0, opened->handle});
    EXPECT_TRUE(closed.ok()) << closed.status().ToString();
    return closed.ok() ? closed->version : "";
  }

  protocol::ReadPageRequest Read(const std::string& mount, const std::string& key,
                                 const std::string& version, uint64_t size, uint64_t page) {
    protocol::ReadPageRequest r;
    r.page = {mount, key, version, size, page, kPage};
    r.offset = 0;
    r.length = protocol::PageLength(size, page, kPage);
    return r;
  }
  // Reads page `page` from `node`; *source says where the bytes came from.
  std::string ReadOn(Node& node, const protocol::ReadPageRequest& r, protocol::PageSource* source) {
    auto result = node.pages->ReadPage(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return "";
    std::string out(result->range.size(), '\0');
    EXPECT_TRUE(result->CopyTo(out).ok());
    *source = result->source;
    return out;
  }
  pagestore::PageKey Key(const std::string& uri, const std::string& key, const std::string& version,
                         uint64_t page) {
    return {uri + "/" + key, version, page};
  }

  testing::TempDir dir_{"written-pages"};
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::MemoryUnderStorage> twice_;
  std::shared_ptr<const mount::MountTable> mounts_;
  PageRules rules_{Clock::Real()};
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unique_ptr<WrittenPages> written_;
  std::unique_ptr<WriteService> writes_;
};

TEST_F(WrittenPagesTest, AWrittenFileReadsBackFromTheCacheUnderItsCommittedVersion) {
  Start(/*cluster=*/false);
  const std::string content = testing::RandomBytes(3 * kPage + 1234, 1);
  const std::string version = WriteFile("/lake/ckpt/step-1.pt", content);
  ASSERT_EQ(version, memory_->Stat("ckpt/step-1.pt")->version);  // What readers will name.
  written_->WaitIdle();
  EXPECT_EQ(written_->stats().pages_cached, 4u);
  for (uint64_t page = 0; page < 4; ++page) {
    protocol::PageSource source{};
    const std::string bytes =
        ReadOn(a(), Read("/lake", "ckpt/step-1.pt", version, content.size(), page), &source);
    EXPECT_EQ(source, protocol::PageSource::kCache) << page;
    EXPECT_EQ(bytes, content.substr(page * kPage, kPage)) << page;
  }
  EXPECT_EQ(a().pages->Stats().ufs_requests, 0u);
  EXPECT_EQ(a().pages->Stats().misses, 0u);

  // A rewrite is cached under its own version; the old version's pages are not served for it.
  const std::string next = testing::RandomBytes(kPage / 2, 2);
  const std::string version2 = WriteFile("/lake/ckpt/step-1.pt", next);
  ASSERT_NE(version2, version);
  written_->WaitIdle();
  protocol::PageSource source{};
  EXPECT_EQ(ReadOn(a(), Read("/lake", "ckpt/step-1.pt", version2, next.size(), 0), &source), next);
  EXPECT_EQ(source, protocol::PageSource::kCache);
  EXPECT_EQ(a().pages->Stats().ufs_requests, 0u);
}

TEST_F(WrittenPagesTest, EachPageGoesToItsReplicasAndTheWritersExtraCopiesAreRemoved) {
  Start(/*cluster=*/true);
  const std::string content = testing::RandomBytes(24 * kPage + 10, 3);
  const std::string version = WriteFile("/lake/ckpt.bin", content);
  written_->WaitIdle();
  size_t on_a = 0, on_b = 0;
  for (uint64_t page = 0; page < 25; ++page) {
    const pagestore::PageKey key = Key("mem://lake", "ckpt.bin", version, page);
    std::vector<std::string> owner = a().pages->ReplicasOf(MountAt("/lake"), key);
    ASSERT_EQ(owner.size(), 1u);
    Node& keeper = owner[0] == "a" ? a() : b();
    Node& other = owner[0] == "a" ? b() : a();
    EXPECT_TRUE(keeper.store->Contains(key)) << page << " on its replica " << owner[0];
    EXPECT_FALSE(other.store->Contains(key)) << page << " left on the worker that is no replica";
    (owner[0] == "a" ? on_a : on_b)++;
    protocol::PageSource source{};
    EXPECT_EQ(ReadOn(keeper, Read("/lake", "ckpt.bin", version, content.size(), page), &source),
              content.substr(page * kPage, kPage));
    EXPECT_EQ(source, protocol::PageSource::kCache) << page;
  }
  ASSERT_GT(on_a, 0u);  // The ring spreads 25 pages over both workers.
  ASSERT_GT(on_b, 0u);
  const WrittenPagesStats stats = written_->stats();
  EXPECT_EQ(stats.pages_cached, on_a);
  EXPECT_EQ(stats.pages_copied, on_b);
  EXPECT_EQ(stats.pages_failed, 0u);
  // b copied from a, never from the source.
  EXPECT_EQ(b().pages->Stats().ufs_requests, 0u);
  EXPECT_EQ(b().pages->Stats().peer_fills, on_b);
  EXPECT_EQ(a().pages->Stats().ufs_requests, 0u);
}

TEST_F(WrittenPagesTest, AMountWithTwoReplicasGetsEveryPageOnBoth) {
  Start(/*cluster=*/true);
  const std::string content = testing::RandomBytes(5 * kPage, 4);
  const std::string version = WriteFile("/twice/model.safetensors", content);
  written_->WaitIdle();
  for (uint64_t page = 0; page < 5; ++page) {
    const pagestore::PageKey key = Key("mem://twice", "model.safetensors", version, page);
    EXPECT_TRUE(a().store->Contains(key)) << page;
    EXPECT_TRUE(b().store->Contains(key)) << page;
  }
  EXPECT_EQ(written_->stats().pages_cached, 5u);
  EXPECT_EQ(written_->stats().pages_copied, 5u);
  EXPECT_EQ(twice_->Stat("model.safetensors")->size, content.size());
}

TEST_F(WrittenPagesTest, ABypassRuleKeepsWrittenFilesOutAndEmptyFilesHaveNoPages) {
  auto rules = policy::PathRules::Create(
      {{.path = "/lake/scratch", .admission = policy::Admission::kBypass}});
  ASSERT_TRUE(rules.ok());
  rules_.SetRules(std::make_shared<const policy::PathRules>(*rules));
  Start(/*cluster=*/false);
  const std::string content = testing::RandomBytes(2 * kPage, 5);
  const std::string version = WriteFile("/lake/scratch/tmp.bin", content);
  const std::string empty = WriteFile("/lake/empty", "");
  const std::string kept = WriteFile("/lake/kept.bin", content);
  written_->WaitIdle();
  EXPECT_FALSE(a().store->Contains(Key("mem://lake", "scratch/tmp.bin", version, 0)));
  EXPECT_TRUE(a().store->Contains(Key("mem://lake", "kept.bin", kept, 1)));
  EXPECT_FALSE(empty.empty());  // Committed, with no page to cache.
  EXPECT_EQ(written_->stats().files, 1u);
  EXPECT_EQ(written_->stats().pages_cached, 2u);
}

TEST_F(WrittenPagesTest, StoppingDropsWhatIsQueuedAndClosesTheSpools) {
  Start(/*cluster=*/false);
  for (int i = 0; i < 20; ++i) {
    WriteFile("/lake/f" + std::to_string(i), testing::RandomBytes(4 * kPage, 10 + i));
  }
  writes_.reset();
  written_.reset();  // Must not hang, leak a descriptor or touch a freed page service.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path() / "spool"),
                          std::filesystem::directory_iterator()),
            0);
}

// The in-process channel of `cairn up` answers a WritePage on its own pool (the FUSE thread goes
// on to the next write) and every other write request on the caller's thread; the bytes land
// either way.
TEST_F(WrittenPagesTest, TheLocalChannelWritesPagesOffTheCallersThread) {
  Start(/*cluster=*/false);
  LocalChannel channel(a().pages.get(), writes_.get(), /*write_threads=*/2);
  auto call = [&](const protocol::WriteRequest& request, std::thread::id* ran_on) {
    std::promise<StatusOr<protocol::WriteReply>> promise;
    channel.CallWrite(request, [&](StatusOr<protocol::WriteReply> reply) {
      *ran_on = std::this_thread::get_id();
      promise.set_value(std::move(reply));
    });
    return promise.get_future().get();
  };
  std::thread::id ran_on;
  protocol::OpenWriteRequest open;
  open.path = "/lake/local.bin";
  open.create = true;
  auto opened = call(open, &ran_on);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  const std::string content = testing::RandomBytes(3 * kPage, 7);
  protocol::WritePageRequest w;
  w.handle = opened->handle;
  w.data = content;
  w.checksums = ChunkChecksums(w.data);
  auto written = call(w, &ran_on);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  auto closed = call(protocol::CloseWriteRequest{0, opened->handle}, &ran_on);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(memory_->Get("local.bin"), content);
}

}  // namespace
}  // namespace cairn::worker
