// Worker-owned replication, end to end in one process: a PageFetcher (the client core) reading
// through real PageServices on real page stores, which look for pages on each other, fill each
// other and repair replica sets. Every hop is a LocalChannel behind a Link the test can cut (a
// killed worker) or hold (a fill frozen half way).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "client/page_fetcher.h"
#include "common/thread_annotations.h"
#include "metrics/registry.h"
#include "placement/ring.h"
#include "testing/gate.h"
#include "testing/test_util.h"
#include "ufs/counting_ufs.h"
#include "ufs/memory_ufs.h"
#include "worker/local_channel.h"
#include "worker/page_service.h"
#include "worker/peer_set.h"

namespace cairn::client {
namespace {

constexpr uint32_t kPage = 64 * 1024;
constexpr uint64_t kPages = 12;

// The way into one worker, shared by the client and the peers: fails every request while the
// worker is "killed", and can hold the copies sent to it (on threads of its own, as a network
// would: the sender's Call returns at once).
class Link : public protocol::PageChannel {
 public:
  explicit Link(std::string id) : id_(std::move(id)) {}
  ~Link() override { JoinHeld(); }
  void set_target(protocol::PageChannel* target) { target_ = target; }

  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override {
    if (frozen_.load()) {
      MutexLock l(&mu_);
      unanswered_.push_back(std::move(done));
      return;
    }
    if (std::holds_alternative<protocol::CopyFromPeerRequest>(request) && hold_copies_.load()) {
      MutexLock l(&mu_);
      held_.emplace_back([this, request, done = std::move(done)]() mutable {
        copy_gate_.Pass();
        Forward(request, {}, std::move(done));
      });
      return;
    }
    Forward(request, dest, std::move(done));
  }
  std::string Describe() const override { return id_; }

  void Kill() { killed_ = true; }
  void HoldCopies() { hold_copies_ = true; }
  // A frozen worker (SIGSTOP): requests are neither served nor refused until Thaw, which
  // refuses them.
  void Freeze() { frozen_ = true; }
  void Thaw() {
    frozen_ = false;
    std::vector<Callback> unanswered;
    {
      MutexLock l(&mu_);
      unanswered.swap(unanswered_);
    }
    for (Callback& done : unanswered) done(UnavailableError(id_ + " was frozen"));
  }
  testing::Gate& copy_gate() { return copy_gate_; }
  // Waits for the held copies (after the gate is opened).
  void JoinHeld() {
    std::vector<std::thread> held;
    {
      MutexLock l(&mu_);
      held.swap(held_);
    }
    for (std::thread& t : held) t.join();
  }

 private:
  void Forward(const protocol::Request& request, std::span<char> dest, Callback done) {
    if (killed_.load()) {
      done(UnavailableError(id_ + " was killed"));
      return;
    }
    target_->Call(request, dest, std::move(done));
  }

  const std::string id_;
  protocol::PageChannel* target_ = nullptr;
  std::atomic<bool> killed_{false};
  std::atomic<bool> hold_copies_{false};
  std::atomic<bool> frozen_{false};
  testing::Gate copy_gate_;
  Mutex mu_;
  std::vector<std::thread> held_ GUARDED_BY(mu_);
  std::vector<Callback> unanswered_ GUARDED_BY(mu_);
};

// The client's view of one worker: counts the requests the client sends it.
class ClientView : public protocol::PageChannel {
 public:
  ClientView(Link* link, std::atomic<int>* calls) : link_(link), calls_(calls) {}
  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override {
    calls_->fetch_add(1);
    link_->Call(request, dest, std::move(done));
  }
  std::string Describe() const override { return link_->Describe(); }

 private:
  Link* link_;
  std::atomic<int>* calls_;
};

struct Worker {
  std::string id;
  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<pagestore::PageStore> store;
  metrics::Registry registry;
  std::unique_ptr<worker::PeerSet> peers;
  std::unique_ptr<worker::PageService> service;
  std::unique_ptr<worker::LocalChannel> local;
  std::shared_ptr<Link> link;
};

class ReplicationTest : public ::testing::Test {
 protected:
  void Start(int workers, int replicas) {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    source_ = std::make_shared<ufs::CountingUnderStorage>(memory_);
    data_ = testing::RandomBytes(kPages * kPage - 100, 7);
    version_ = memory_->Put("obj", data_);
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    spec.replicas = replicas;
    mounts_ = std::move(mount::MountTable::CreateWith({spec}, {source_})).value();
    for (int i = 0; i < workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->id = "w" + std::to_string(i);
      w->link = std::make_shared<Link>(w->id);
      workers_[w->id] = std::move(w);
    }
    for (auto& [id, w] : workers_) {
      w->dir = std::make_unique<testing::TempDir>(id);
      pagestore::PageStoreOptions so;
      so.dirs.push_back({w->dir->str(), 64ull << 20});
      so.page_size = kPage;
      w->store = std::move(pagestore::PageStore::Create(so)).value();
      // A peer's address is its id here: the factory hands out its Link.
      w->peers = std::make_unique<worker::PeerSet>(id, [this](const std::string& address) {
        return std::static_pointer_cast<protocol::PageChannel>(workers_.at(address)->link);
      });
      worker::PageServiceOptions po;
      po.page_size = kPage;
      po.worker_id = id;
      po.peers = w->peers.get();
      po.peer_timeout = peer_timeout_;
      w->service = std::make_unique<worker::PageService>(mounts_, w->store.get(), &w->registry, po);
      w->local = std::make_unique<worker::LocalChannel>(w->service.get());
      w->link->set_target(w->local.get());
    }
    std::vector<std::string> all;
    for (auto& [id, w] : workers_) all.push_back(id);
    SetRing(all);
  }
  void TearDown() override {
    // Cut every link first: a service being destroyed still sends its queued replica copies,
    // and they must not reach a service destroyed before it.
    for (auto& [id, w] : workers_) {
      w->link->Kill();
      w->link->copy_gate().Open();
      w->link->Thaw();
    }
    for (auto& [id, w] : workers_) w->link->JoinHeld();
    for (auto& [id, w] : workers_) w->service.reset();
    workers_.clear();
  }

  // The ring every worker and the client use from now on.
  void SetRing(const std::vector<std::string>& ids) {
    std::vector<placement::WorkerNode> nodes;
    for (const std::string& id : ids) nodes.push_back({id, id, 1.0});
    for (auto& [id, w] : workers_) ASSERT_TRUE(w->peers->SetWorkers(nodes).ok());
    ring_ = ids;
    if (fetcher_ != nullptr) {
      ASSERT_TRUE(fetcher_->SetWorkers(nodes).ok());
    }
  }

  PageFetcher* Client() {
    if (fetcher_ == nullptr) {
      fetcher_ = std::make_unique<PageFetcher>(
          kPage,
          [this](const placement::WorkerNode& node) {
            return std::make_unique<ClientView>(workers_.at(node.id)->link.get(), &client_calls_);
          },
          2);
      SetRing(ring_);
    }
    return fetcher_.get();
  }

  ObjectRef Object() {
    ObjectRef ref;
    ref.table = mounts_;
    ref.mount = mounts_->mounts()[0].get();
    ref.key = "obj";
    ref.object_id = ref.mount->ObjectId("obj");
    ref.info.size = data_.size();
    ref.info.version = version_;
    return ref;
  }

  // Reads every page through the client and checks each byte.
  void ReadAll() {
    ObjectRef ref = Object();
    for (uint64_t p = 0; p < kPages; ++p) {
      uint32_t len = protocol::PageLength(data_.size(), p, kPage);
      std::string out(len, '\0');
      Status s = Client()->ReadRange(ref, p, 0, out);
      ASSERT_TRUE(s.ok()) << "page " << p << ": " << s.ToString();
      ASSERT_EQ(out, data_.substr(p * kPage, len)) << "page " << p;
    }
  }

  pagestore::PageKey Key(uint64_t page) {
    return {mounts_->mounts()[0]->ObjectId("obj"), version_, page};
  }
  // The workers the ring names as the page's first `n`.
  std::vector<std::string> ReplicasOf(uint64_t page, size_t n) {
    pagestore::PageKey key = Key(page);
    return workers_.at(ring_.front())
        ->peers->Replicas(placement::PageKeyHash(key.object_id, key.version, page), n);
  }
  std::set<std::string> Holders(uint64_t page) {
    std::set<std::string> holders;
    for (auto& [id, w] : workers_) {
      if (w->store->Contains(Key(page))) holders.insert(id);
    }
    return holders;
  }
  // Waits (copies are background work) until every page is on exactly its `n` replicas.
  bool AllPagesOnTheirReplicas(size_t n) {
    for (int i = 0; i < 2000; ++i) {
      bool all = true;
      for (uint64_t p = 0; p < kPages && all; ++p) {
        std::vector<std::string> want = ReplicasOf(p, n);
        std::set<std::string> holders = Holders(p);
        for (const std::string& id : want) all &= holders.count(id) == 1;
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  uint64_t SourceReads() { return source_->counts().reads; }
  uint64_t Sum(uint64_t worker::ServiceStats::*field) {
    uint64_t total = 0;
    for (auto& [id, w] : workers_) total += w->service->Stats().*field;
    return total;
  }

  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::CountingUnderStorage> source_;
  std::shared_ptr<const mount::MountTable> mounts_;
  std::string data_;
  std::string version_;
  std::map<std::string, std::unique_ptr<Worker>> workers_;
  std::vector<std::string> ring_;
  std::unique_ptr<PageFetcher> fetcher_;
  std::atomic<int> client_calls_{0};
  std::chrono::milliseconds peer_timeout_{2000};
};

TEST_F(ReplicationTest, ColdPageOfThreeReplicasCostsOneSourceReadAndOneClientRoundTrip) {
  Start(4, 3);
  ReadAll();
  EXPECT_EQ(client_calls_.load(), static_cast<int>(kPages));  // One request per page.
  EXPECT_EQ(SourceReads(), kPages);                           // One source read per page.
  EXPECT_EQ(Client()->counters().fallback_bytes.load(), 0u);
  // The workers filled the other two replicas of each page, from the one that read it.
  ASSERT_TRUE(AllPagesOnTheirReplicas(3));
  for (uint64_t p = 0; p < kPages; ++p) EXPECT_EQ(Holders(p).size(), 3u) << "page " << p;
  EXPECT_EQ(Sum(&worker::ServiceStats::replica_copies), 2 * kPages);
  EXPECT_EQ(Sum(&worker::ServiceStats::peer_fills), 2 * kPages);
  EXPECT_EQ(Sum(&worker::ServiceStats::peer_fill_failures), 0u);
  EXPECT_EQ(SourceReads(), kPages);
  // Warm: every read is a hit on the preferred replica, still one request per page.
  int before = client_calls_.load();
  ReadAll();
  EXPECT_EQ(client_calls_.load() - before, static_cast<int>(kPages));
  EXPECT_EQ(SourceReads(), kPages);
}

TEST_F(ReplicationTest, SingleReplicaMountsNeverAskPeers) {
  Start(3, 1);
  ReadAll();
  EXPECT_EQ(SourceReads(), kPages);
  EXPECT_EQ(Sum(&worker::ServiceStats::replica_lookups), 0u);
  EXPECT_EQ(Sum(&worker::ServiceStats::replica_copies), 0u);
  ASSERT_TRUE(AllPagesOnTheirReplicas(1));  // Written in the background.
  for (uint64_t p = 0; p < kPages; ++p) EXPECT_EQ(Holders(p).size(), 1u) << "page " << p;
}

TEST_F(ReplicationTest, KilledReplicaCostsNoReadErrorAndNoSourceRead) {
  Start(3, 2);
  ReadAll();
  ASSERT_TRUE(AllPagesOnTheirReplicas(2));
  workers_["w1"]->link->Kill();  // Still in the ring: its lease has not run out.
  ReadAll();
  EXPECT_EQ(SourceReads(), kPages);
  EXPECT_EQ(Client()->counters().fallback_bytes.load(), 0u);
}

// A frozen replica (SIGSTOP: connected, silent) must not make a miss on another replica wait
// past the client's deadline: the lookup takes at most half of it, then the source is read. Seen
// in the chaos test: a client failed over from the frozen worker to one whose miss then waited
// out the whole peer timeout on it, and so on, until the freeze ended.
TEST_F(ReplicationTest, FrozenReplicaCostsAMissAtMostHalfTheClientsDeadline) {
  peer_timeout_ = std::chrono::milliseconds(60'000);
  Start(2, 2);  // Every page's replicas are w0 and w1.
  workers_["w1"]->link->Freeze();
  protocol::ReadPageRequest request;
  request.deadline_ms = 2000;
  request.page.mount = "/lake";
  request.page.key = "obj";
  request.page.version = version_;
  request.page.object_size = data_.size();
  request.page.page_index = 3;
  request.page.page_size = kPage;
  request.offset = 0;
  request.length = kPage;
  const auto start = std::chrono::steady_clock::now();
  auto result = workers_["w0"]->service->ReadPage(request);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->source, protocol::PageSource::kUnderStorage);
  std::string bytes(result->range.size(), '\0');
  ASSERT_TRUE(result->CopyTo(bytes).ok());
  EXPECT_EQ(bytes, data_.substr(3 * kPage, kPage));
  // Half the deadline is 1 s; the bound only tells "the deadline" from "the peer timeout".
  EXPECT_LT(waited, std::chrono::seconds(30));
  EXPECT_EQ(SourceReads(), 1u);
}

TEST_F(ReplicationTest, ReplicaKilledDuringItsFillLeavesTheOthersFilled) {
  Start(4, 3);
  // Every copy sent to w2 is held at its door; w2 is killed while they wait.
  workers_["w2"]->link->HoldCopies();
  ReadAll();
  EXPECT_EQ(SourceReads(), kPages);
  size_t w2_pages = 0;
  for (uint64_t p = 0; p < kPages; ++p) {
    std::vector<std::string> replicas = ReplicasOf(p, 3);
    w2_pages += std::count(replicas.begin(), replicas.end(), "w2");
  }
  ASSERT_GT(w2_pages, 0u);
  // While the copies to w2 wait, every other replica gets its copy.
  auto others_filled = [&] {
    for (uint64_t p = 0; p < kPages; ++p) {
      for (const std::string& id : ReplicasOf(p, 3)) {
        if (id != "w2" && !Holders(p).count(id)) return false;
      }
    }
    return true;
  };
  for (int i = 0; i < 2000 && !others_filled(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(others_filled());
  // The copies to w2 are those of pages another replica read (w2 read the rest itself).
  ASSERT_TRUE(workers_["w2"]->link->copy_gate().WaitForArrivals(1));
  workers_["w2"]->link->Kill();
  workers_["w2"]->link->copy_gate().Open();
  workers_["w2"]->link->JoinHeld();
  // Its fills died with it: w2 holds only the pages it read from the source itself.
  const uint64_t own = workers_["w2"]->service->Stats().ufs_requests;
  EXPECT_LT(own, w2_pages);
  auto on_w2 = [&] {
    uint64_t n = 0;
    for (uint64_t p = 0; p < kPages; ++p) n += Holders(p).count("w2");
    return n;
  };
  for (int i = 0; i < 2000 && on_w2() != own; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(on_w2(), own);
  // Reads go on from the other replicas: no error, no source read.
  ReadAll();
  EXPECT_EQ(SourceReads(), kPages);
  EXPECT_EQ(Client()->counters().fallback_bytes.load(), 0u);
}

TEST_F(ReplicationTest, ReplicaSetChangeFindsTheSurvivingCopyAndRepairs) {
  Start(4, 2);
  ReadAll();
  ASSERT_TRUE(AllPagesOnTheirReplicas(2));
  std::map<uint64_t, std::set<std::string>> before;
  for (uint64_t p = 0; p < kPages; ++p) before[p] = Holders(p);
  // w1 dies and leaves the ring: its pages' replica sets now include a worker without them.
  workers_["w1"]->link->Kill();
  SetRing({"w0", "w2", "w3"});
  ReadAll();
  // Every page had a copy on a surviving replica: nothing was read from the source again.
  EXPECT_EQ(SourceReads(), kPages);
  EXPECT_EQ(Client()->counters().fallback_bytes.load(), 0u);
  // Read repair happens where a read lands on the replica without the page (a hit on the other
  // one repairs nothing): many clients, each preferring its own replica per page, reach both.
  for (int c = 0; c < 40; ++c) {
    fetcher_.reset();
    ReadAll();
  }
  EXPECT_EQ(SourceReads(), kPages);
  ASSERT_TRUE(AllPagesOnTheirReplicas(2));
  EXPECT_GT(Sum(&worker::ServiceStats::peer_fills), 0u);
  EXPECT_EQ(Sum(&worker::ServiceStats::peer_fill_failures), 0u);
  uint64_t moved = 0;
  for (uint64_t p = 0; p < kPages; ++p) moved += before[p].count("w1");
  EXPECT_GT(moved, 0u);
}

TEST_F(ReplicationTest, ConcurrentClientsOfOneColdPageGetExactBytes) {
  Start(3, 3);
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 6; ++c) {
    readers.emplace_back([&, c] {
      // Each reader is its own client (its own preferred replica per page).
      PageFetcher f(
          kPage,
          [this](const placement::WorkerNode& node) {
            return std::make_unique<ClientView>(workers_.at(node.id)->link.get(), &client_calls_);
          },
          2);
      std::vector<placement::WorkerNode> nodes;
      for (const std::string& id : ring_) nodes.push_back({id, id, 1.0});
      if (!f.SetWorkers(nodes).ok()) bad.fetch_add(1);
      ObjectRef ref = Object();
      for (uint64_t i = 0; i < kPages; ++i) {
        uint64_t p = (i + c) % kPages;
        uint32_t len = protocol::PageLength(data_.size(), p, kPage);
        std::string out(len, '\0');
        if (!f.ReadRange(ref, p, 0, out).ok() || out != data_.substr(p * kPage, len)) {
          bad.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_TRUE(AllPagesOnTheirReplicas(3));
  // Two replicas missing at the same moment may both read the source; never more than R.
  EXPECT_LE(SourceReads(), 3 * kPages);
  EXPECT_EQ(Sum(&worker::ServiceStats::peer_fill_failures), 0u);
}

}  // namespace
}  // namespace cairn::client
