// PageFetcher: placement changes (SetWorkers) and hot-page replicas, over fake channels that
// serve pages from an in-memory source and remember which worker cached what.
#include "client/page_fetcher.h"

#include <gtest/gtest.h>

#include <future>

#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "common/checksum.h"
#include "common/thread_annotations.h"
#include "mount/mount_table.h"
#include "ufs/memory_ufs.h"

namespace cairn::client {
namespace {

constexpr uint32_t kPage = 128 * 1024;

// A worker: serves any page from `source`, caching the pages it read (a miss answers
// kUnderStorage, a hit kCache). Can be made to fail every request.
class FakeWorker : public protocol::PageChannel {
 public:
  FakeWorker(std::string id, std::shared_ptr<ufs::MemoryUnderStorage> source)
      : id_(std::move(id)), source_(std::move(source)) {}

  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override {
    if (down_.load()) {
      done(UnavailableError(id_ + " is down"));
      return;
    }
    const protocol::PageRef& ref = protocol::BaseOf(request).page;
    uint32_t page_length = protocol::PageLengthOf(ref);
    std::string page(page_length, '\0');
    auto n = source_->Read(ref.key, ref.version, ref.page_index * uint64_t{ref.page_size}, page);
    if (!n.ok()) {
      done(n.status());
      return;
    }
    if (const auto* copy = std::get_if<protocol::CopyFromPeerRequest>(&request)) {
      MutexLock l(&mu_);
      peer_hints_.push_back({ref.page_index, copy->peer});
    }
    if (std::holds_alternative<protocol::LoadPageRequest>(request) ||
        std::holds_alternative<protocol::CopyFromPeerRequest>(request)) {
      protocol::PageReply reply;
      {
        MutexLock l(&mu_);
        ++requests_;
        reply.source = cached_.insert(ref.page_index).second ? protocol::PageSource::kUnderStorage
                                                             : protocol::PageSource::kCache;
      }
      done(std::move(reply));  // Not under mu_: the callback may call other workers.
      return;
    }
    uint32_t offset = 0, length = 0;
    if (const auto* read = std::get_if<protocol::ReadPageRequest>(&request)) {
      offset = read->offset;
      length = read->length;
    } else if (const auto* lookup = std::get_if<protocol::LookupPageRequest>(&request)) {
      offset = lookup->offset;
      length = lookup->length;
    } else {
      done(UnimplementedError("the fake worker serves reads, lookups and loads"));
      return;
    }
    protocol::ByteRange range = protocol::AlignedRange(offset, length, page_length);
    if (std::holds_alternative<protocol::LookupPageRequest>(request)) {
      MutexLock l(&mu_);
      ++requests_;
      if (!cached_.count(ref.page_index)) {
        missed_.insert(ref.page_index);
        protocol::PageReply none;
        none.source = protocol::PageSource::kUnderStorage;
        done(std::move(none));
        return;
      }
    }
    std::memcpy(dest.data(), page.data() + range.begin, range.size());
    protocol::PageReply reply;
    {
      MutexLock l(&mu_);
      reply.source = cached_.insert(ref.page_index).second ? protocol::PageSource::kUnderStorage
                                                           : protocol::PageSource::kCache;
      ++requests_;
    }
    reply.data_offset = range.begin;
    reply.data_length = range.size();
    reply.checksums = ChunkChecksums(std::span<const char>(dest.data(), range.size()));
    done(std::move(reply));
  }
  // Metadata: answers a stat of any path with this worker's id as the version (so a test sees
  // who answered), or `metadata_error` when set.
  void CallMetadata(const protocol::MetadataRequest& request, MetadataCallback done) override {
    if (down_.load()) {
      done(UnavailableError(id_ + " is down"));
      return;
    }
    {
      MutexLock l(&mu_);
      ++metadata_requests_;
      if (!metadata_error_.ok()) {
        done(metadata_error_);
        return;
      }
    }
    protocol::MetadataReply reply;
    reply.entries.push_back({protocol::PathOf(request), false, 1, id_, 0});
    done(std::move(reply));
  }
  void set_metadata_error(Status s) {
    MutexLock l(&mu_);
    metadata_error_ = std::move(s);
  }
  int metadata_requests() const {
    MutexLock l(&mu_);
    return metadata_requests_;
  }
  std::string Describe() const override { return id_; }

  std::set<uint64_t> cached() const {
    MutexLock l(&mu_);
    return cached_;
  }
  int requests() const {
    MutexLock l(&mu_);
    return requests_;
  }
  void set_down(bool down) { down_ = down; }
  // Pages a cache-only request found missing here.
  std::set<uint64_t> missed() const {
    MutexLock l(&mu_);
    return missed_;
  }
  // (page, peer) of every CopyFromPeer request, in arrival order.
  std::vector<std::pair<uint64_t, std::string>> peer_hints() const {
    MutexLock l(&mu_);
    return peer_hints_;
  }

 private:
  const std::string id_;
  std::shared_ptr<ufs::MemoryUnderStorage> source_;
  std::atomic<bool> down_{false};
  mutable Mutex mu_;
  std::set<uint64_t> cached_ GUARDED_BY(mu_);
  int requests_ GUARDED_BY(mu_) = 0;
  std::vector<std::pair<uint64_t, std::string>> peer_hints_ GUARDED_BY(mu_);
  std::set<uint64_t> missed_ GUARDED_BY(mu_);
  Status metadata_error_ GUARDED_BY(mu_);
  int metadata_requests_ GUARDED_BY(mu_) = 0;
};

// Hands the fetcher a non-owning view of the test's FakeWorkers, so the test can inspect them.
class Borrowed : public protocol::PageChannel {
 public:
  explicit Borrowed(FakeWorker* w) : w_(w) {}
  void Call(const protocol::Request& r, std::span<char> d, Callback done) override {
    w_->Call(r, d, std::move(done));
  }
  void CallMetadata(const protocol::MetadataRequest& r, MetadataCallback done) override {
    w_->CallMetadata(r, std::move(done));
  }
  std::string Describe() const override { return w_->Describe(); }

 private:
  FakeWorker* w_;
};

class PageFetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    for (int i = 0; i < 4; ++i) {
      std::string id = "w" + std::to_string(i);
      workers_[id] = std::make_unique<FakeWorker>(id, source_);
    }
    data_.resize(kPage * 40 + 777);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<char>(i * 131 + 7);
    version_ = source_->Put("obj", data_);
  }

  std::unique_ptr<PageFetcher> MakeFetcher() {
    auto f = std::make_unique<PageFetcher>(
        kPage,
        [this](const placement::WorkerNode& node) {
          ++channels_made_;
          return std::make_unique<Borrowed>(workers_.at(node.id).get());
        },
        2);
    return f;
  }

  ObjectRef Object(int replicas) {
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    spec.replicas = replicas;
    auto table = mount::MountTable::CreateWith({spec}, {source_});
    EXPECT_TRUE(table.ok());
    ObjectRef ref;
    ref.table = *table;
    ref.mount = ref.table->mounts()[0].get();
    ref.key = "obj";
    ref.object_id = ref.mount->ObjectId("obj");
    ref.info.size = data_.size();
    ref.info.version = version_;
    return ref;
  }

  static std::vector<placement::WorkerNode> Nodes(std::vector<std::string> ids) {
    std::vector<placement::WorkerNode> nodes;
    for (auto& id : ids) nodes.push_back({id, id + ":7070", 1.0});
    return nodes;
  }

  void ReadAll(PageFetcher* f, const ObjectRef& ref) {
    uint64_t pages = (data_.size() + kPage - 1) / kPage;
    for (uint64_t p = 0; p < pages; ++p) {
      uint32_t len = protocol::PageLength(data_.size(), p, kPage);
      std::string out(len, '\0');
      ASSERT_TRUE(f->ReadRange(ref, p, 0, out).ok());
      ASSERT_EQ(out, data_.substr(p * kPage, len)) << "page " << p;
    }
  }

  std::shared_ptr<ufs::MemoryUnderStorage> source_;
  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
  std::string data_;
  std::string version_;
  int channels_made_ = 0;
};

TEST_F(PageFetcherTest, NoWorkersReadsTheSource) {
  auto f = MakeFetcher();
  ReadAll(f.get(), Object(1));
  EXPECT_EQ(f->counters().fallback_bytes.load(), data_.size());
}

TEST_F(PageFetcherTest, SetWorkersKeepsUnchangedChannelsAndMakesNewOnes) {
  auto f = MakeFetcher();
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2"})).ok());
  EXPECT_EQ(channels_made_, 3);
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2", "w3"})).ok());
  EXPECT_EQ(channels_made_, 4);  // Only w3 is new.
  auto moved = Nodes({"w0", "w1", "w2", "w3"});
  moved[1].address = "10.0.0.9:7070";  // Same id, new address: a new channel.
  ASSERT_TRUE(f->SetWorkers(moved).ok());
  EXPECT_EQ(channels_made_, 5);
  EXPECT_EQ(f->workers().size(), 4u);
  // A bad list is refused and the previous one stays.
  EXPECT_FALSE(f->SetWorkers(Nodes({"w0", "w0"})).ok());
  EXPECT_EQ(f->workers().size(), 4u);
}

TEST_F(PageFetcherTest, PagesSpreadOverAllWorkersAndJoiningMovesAboutOneQuarter) {
  auto f = MakeFetcher();
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2"})).ok());
  ObjectRef ref = Object(1);
  ReadAll(f.get(), ref);
  std::map<std::string, std::set<uint64_t>> before;
  for (auto& [id, w] : workers_) {
    before[id] = w->cached();
    if (id != "w3") {
      EXPECT_GT(w->requests(), 0) << id;
    }
  }
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2", "w3"})).ok());
  ReadAll(f.get(), ref);
  // Only pages now owned by w3 moved: the old workers got no new misses.
  for (const char* id : {"w0", "w1", "w2"}) EXPECT_EQ(workers_[id]->cached(), before[id]) << id;
  size_t moved = workers_["w3"]->cached().size();
  EXPECT_GT(moved, 0u);
  EXPECT_LT(moved, 41u / 2);  // ~1/4 of 41 pages; generous bound for a small sample.
}

TEST_F(PageFetcherTest, ReplicatedReadIsOneRequestToOneReplica) {
  // Replication is the workers' job (see replication_test.cc): the client sends each read to
  // one of the page's replicas, and only there.
  auto f = MakeFetcher();
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2", "w3"})).ok());
  ObjectRef ref = Object(3);
  ReadAll(f.get(), ref);
  int requests = 0;
  size_t cached = 0;
  for (auto& [id, w] : workers_) {
    requests += w->requests();
    cached += w->cached().size();
    EXPECT_TRUE(w->peer_hints().empty()) << id;
  }
  EXPECT_EQ(requests, 41);
  EXPECT_EQ(cached, 41u);
}

TEST_F(PageFetcherTest, ADownReplicaFailsOverToAnotherReplica) {
  auto f = MakeFetcher();
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2", "w3"})).ok());
  ObjectRef ref = Object(2);
  workers_["w1"]->set_down(true);
  ReadAll(f.get(), ref);
  EXPECT_EQ(f->counters().fallback_bytes.load(), 0u);
  EXPECT_GT(f->counters().page_read_failures.load(), 0u);
  EXPECT_TRUE(workers_["w1"]->cached().empty());
}

TEST_F(PageFetcherTest, ReplicatedLoadReadsTheSourceOnceThenCopiesFromThatReplica) {
  auto f = MakeFetcher();
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2"})).ok());
  ObjectRef ref = Object(3);
  for (uint64_t page = 0; page < 5; ++page) {
    std::promise<PageFetcher::ControlResult> result;
    f->Control(ref, page, PageFetcher::ControlOp::kLoad, 3,
               [&result](const PageFetcher::ControlResult& r) { result.set_value(r); });
    PageFetcher::ControlResult r = result.get_future().get();
    EXPECT_EQ(r.sent, 3);
    EXPECT_EQ(r.failed, 0);
    EXPECT_EQ(r.was_cached, 0);
  }
  // Per page: two hints, both naming the same worker, which got none itself.
  std::map<uint64_t, std::set<std::string>> named;
  std::map<uint64_t, std::set<std::string>> hinted;
  for (auto& [id, w] : workers_) {
    if (id == "w3") continue;  // Not in the ring.
    EXPECT_EQ(w->cached().size(), 5u) << id;
    for (const auto& [page, peer] : w->peer_hints()) {
      named[page].insert(peer);
      hinted[page].insert(id);
    }
  }
  ASSERT_EQ(named.size(), 5u);
  for (const auto& [page, peers] : named) {
    ASSERT_EQ(peers.size(), 1u) << "page " << page;
    EXPECT_EQ(hinted[page].size(), 2u) << "page " << page;
    EXPECT_FALSE(hinted[page].count(*peers.begin())) << "page " << page;
  }
  // A load of one copy carries no hint; nor do the others' loads when the first one failed.
  auto load = [&](uint64_t page, int copies) {
    std::promise<PageFetcher::ControlResult> result;
    f->Control(ref, page, PageFetcher::ControlOp::kLoad, copies,
               [&result](const PageFetcher::ControlResult& r) { result.set_value(r); });
    return result.get_future().get();
  };
  size_t hints_before = 0;
  for (auto& [id, w] : workers_) hints_before += w->peer_hints().size();
  EXPECT_EQ(load(8, 1).sent, 1);
  std::string first;
  for (auto& [id, w] : workers_) {
    if (w->cached().count(8)) first = id;
  }
  ASSERT_FALSE(first.empty());
  workers_[first]->set_down(true);
  PageFetcher::ControlResult r = load(8, 3);
  EXPECT_EQ(r.failed, 1);
  size_t hints_after = 0;
  size_t holders = 0;
  for (auto& [id, w] : workers_) {
    hints_after += w->peer_hints().size();
    holders += w->cached().count(8);
  }
  EXPECT_EQ(hints_after, hints_before);
  EXPECT_EQ(holders, 3u);  // The first (down now) from before, the two others from the source.
}

TEST_F(PageFetcherTest, ReplicaReadsAreSpreadAcrossClients) {
  // Many clients (fetchers with different salts) reading one page hit both replicas.
  ObjectRef ref = Object(2);
  std::set<std::string> served;
  for (int c = 0; c < 32; ++c) {
    auto f = MakeFetcher();
    ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2"})).ok());
    std::map<std::string, int> before;
    for (auto& [id, w] : workers_) before[id] = w->requests();
    std::string out(kPage, '\0');
    ASSERT_TRUE(f->ReadRange(ref, 5, 0, out).ok());
    for (auto& [id, w] : workers_) {
      // A read sends exactly one request: to this fetcher's preferred replica.
      if (w->requests() > before[id]) served.insert(id);
    }
  }
  EXPECT_EQ(served.size(), 2u);
}

TEST_F(PageFetcherTest, FailsOverToTheNextWorkerThenTheSource) {
  auto f = MakeFetcher();
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1"})).ok());
  workers_["w0"]->set_down(true);
  ObjectRef ref = Object(1);
  ReadAll(f.get(), ref);
  EXPECT_EQ(f->counters().fallback_bytes.load(), 0u);
  workers_["w1"]->set_down(true);
  ReadAll(f.get(), ref);
  EXPECT_EQ(f->counters().fallback_bytes.load(), data_.size());
}

// Metadata goes to the path's owner on the ring, then the next worker if the owner cannot
// answer; a worker's answer (a denial, NotFound) is final.
TEST_F(PageFetcherTest, MetadataAsksThePathsOwnerThenTheNextWorker) {
  auto f = MakeFetcher();
  protocol::StatPathRequest stat{0, "/lake/some/dir"};
  EXPECT_EQ(f->Metadata(stat).status().code(), StatusCode::kUnavailable);  // No workers yet.
  ASSERT_TRUE(f->SetWorkers(Nodes({"w0", "w1", "w2", "w3"})).ok());
  auto first = f->Metadata(stat);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string owner = first->entries.at(0).version;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f->Metadata(stat)->entries.at(0).version, owner);

  workers_[owner]->set_down(true);
  auto failed_over = f->Metadata(stat);
  ASSERT_TRUE(failed_over.ok()) << failed_over.status().ToString();
  const std::string second = failed_over->entries.at(0).version;
  EXPECT_NE(second, owner);

  workers_[second]->set_metadata_error(PermissionDeniedError("no read grant"));
  const int before = workers_[second]->metadata_requests();
  EXPECT_EQ(f->Metadata(stat).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(workers_[second]->metadata_requests(), before + 1);

  workers_[second]->set_metadata_error(UnavailableError("has not read the policy yet"));
  auto none = f->Metadata(stat);  // Two attempts (max_worker_attempts): both unavailable.
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("has not read the policy yet"), std::string::npos)
      << none.status().message();
}

}  // namespace
}  // namespace cairn::client
