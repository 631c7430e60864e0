// Peer fills (protocol PEER) and the PeerSet that resolves peers: a worker asked to cache a page
// that another worker has just read copies it from that worker instead of the source.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"
#include "worker/local_channel.h"
#include "worker/page_service.h"
#include "worker/peer_set.h"

namespace cairn::worker {
namespace {

constexpr uint32_t kPage = 256 * 1024;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Passes reads on to another channel, optionally flipping one byte of every reply's data.
class Relay : public protocol::PageChannel {
 public:
  Relay(protocol::PageChannel* next, bool corrupt) : next_(next), corrupt_(corrupt) {}
  void ReadPage(const protocol::ReadPageRequest& request, std::span<char> dest,
                Callback done) override {
    ++calls_;
    next_->ReadPage(request, dest, [this, dest, done](StatusOr<protocol::PageReply> reply) {
      if (reply.ok() && corrupt_ && reply->data_length > 0) dest[reply->data_length / 2] ^= 1;
      done(std::move(reply));
    });
  }
  std::string Describe() const override { return "relay"; }
  int calls() const { return calls_.load(); }

 private:
  protocol::PageChannel* next_;
  const bool corrupt_;
  std::atomic<int> calls_{0};
};

// One worker's page service and store on a shared source.
struct Node {
  Node(const std::filesystem::path& dir, std::shared_ptr<const mount::MountTable> mounts,
       const PeerSet* peers) {
    std::filesystem::create_directories(dir);
    pagestore::PageStoreOptions so;
    so.dirs.push_back({dir.string(), 64ull << 20});
    so.page_size = kPage;
    auto created = pagestore::PageStore::Create(so);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (created.ok()) store = std::move(created).value();
    PageServiceOptions po;
    po.page_size = kPage;
    po.peers = peers;
    po.peer_timeout = std::chrono::milliseconds(500);
    service = std::make_unique<PageService>(std::move(mounts), store.get(), &registry, po);
    channel = std::make_unique<LocalChannel>(service.get());
  }
  metrics::Registry registry;
  std::unique_ptr<pagestore::PageStore> store;
  std::unique_ptr<PageService> service;
  std::unique_ptr<LocalChannel> channel;
};

class PeerFillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cairn-peer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    source_ = std::make_shared<ufs::FaultInjectingUnderStorage>(memory_, 7);
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    mounts_ = *mount::MountTable::CreateWith({spec}, {source_});
    a_ = std::make_unique<Node>(dir_ / "a", mounts_, nullptr);
    good_ = std::make_unique<Relay>(a_->channel.get(), /*corrupt=*/false);
    bad_ = std::make_unique<Relay>(a_->channel.get(), /*corrupt=*/true);
    peers_ = std::make_unique<PeerSet>("b", [this](const std::string& address) {
      protocol::PageChannel* relay = address == "bad:1" ? bad_.get() : good_.get();
      // Non-owning: the relays outlive the peer set.
      return std::shared_ptr<protocol::PageChannel>(relay, [](protocol::PageChannel*) {});
    });
    peers_->SetPeers({{"a", "a:1"}, {"b", "b:1"}, {"liar", "bad:1"}});
    b_ = std::make_unique<Node>(dir_ / "b", mounts_, peers_.get());
    data_ = RandomBytes(kPage + 1000, 11);
    memory_->Put("obj", data_);
  }
  void TearDown() override {
    b_.reset();
    a_.reset();
    std::filesystem::remove_all(dir_);
  }

  protocol::ReadPageRequest Request(uint64_t page, const std::string& peer) {
    protocol::ReadPageRequest r;
    r.page_size = kPage;
    r.mount = "/lake";
    r.key = "obj";
    r.version = memory_->Stat("obj")->version;
    r.object_size = data_.size();
    r.page_index = page;
    r.offset = 0;
    r.length = protocol::PageLength(data_.size(), page, kPage);
    if (!peer.empty()) {
      r.flags = protocol::kFlagPeer;
      r.peer = peer;
    }
    return r;
  }
  std::string Read(Node* node, const protocol::ReadPageRequest& r) {
    auto result = node->service->ReadPage(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return "";
    std::string out(result->range.size(), '\0');
    EXPECT_TRUE(result->CopyTo(out).ok());
    return out;
  }
  bool Cached(Node* node, uint64_t page) {
    pagestore::PageKey key{"mem://lake/obj", memory_->Stat("obj")->version, page};
    for (int i = 0; i < 1000 && !node->store->Contains(key); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return node->store->Contains(key);
  }
  uint64_t SourceReads() { return source_->calls(ufs::UfsOp::kRead); }

  std::filesystem::path dir_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<ufs::FaultInjectingUnderStorage> source_;
  std::shared_ptr<const mount::MountTable> mounts_;
  std::unique_ptr<Node> a_;
  std::unique_ptr<Relay> good_;
  std::unique_ptr<Relay> bad_;
  std::unique_ptr<PeerSet> peers_;
  std::unique_ptr<Node> b_;
  std::string data_;
};

TEST_F(PeerFillTest, AFillCopiesThePageFromThePeerInsteadOfTheSource) {
  EXPECT_EQ(Read(a_.get(), Request(0, "")), data_.substr(0, kPage));
  EXPECT_EQ(SourceReads(), 1u);
  // Right away: a's copy may still be on its way to disk; it is served from memory then.
  auto copied = b_->service->ReadPage(Request(0, "a"));
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->source, protocol::PageSource::kPeer);
  std::string bytes(copied->range.size(), '\0');
  ASSERT_TRUE(copied->CopyTo(bytes).ok());
  EXPECT_EQ(bytes, data_.substr(0, kPage));
  EXPECT_EQ(SourceReads(), 1u);
  EXPECT_EQ(b_->service->Stats().peer_fills, 1u);
  EXPECT_EQ(b_->service->Stats().ufs_requests, 0u);
  // For a, a page sent to a peer, not a reader's hit.
  EXPECT_EQ(a_->service->Stats().peer_serves, 1u);
  EXPECT_EQ(a_->service->Stats().hits, 0u);
  EXPECT_EQ(a_->service->Stats().requests, 1u);
  EXPECT_TRUE(Cached(b_.get(), 0));
  // b now serves it from its own cache.
  EXPECT_EQ(Read(b_.get(), Request(0, "")), data_.substr(0, kPage));
  EXPECT_EQ(b_->service->Stats().hits, 1u);
  EXPECT_EQ(SourceReads(), 1u);
}

TEST_F(PeerFillTest, ALoadWithAPeerCopiesItToo) {
  EXPECT_EQ(Read(a_.get(), Request(1, "")), data_.substr(kPage));
  ASSERT_TRUE(Cached(a_.get(), 1));
  protocol::ReadPageRequest load = Request(1, "a");
  load.flags |= protocol::kFlagLoad;
  auto source = b_->service->ControlPage(load);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(*source, protocol::PageSource::kPeer);
  EXPECT_TRUE(Cached(b_.get(), 1));
  EXPECT_EQ(SourceReads(), 1u);
  EXPECT_EQ(b_->service->Stats().peer_fills, 1u);
}

TEST_F(PeerFillTest, APeerWithoutThePageMeansOneSourceRead) {
  EXPECT_EQ(Read(b_.get(), Request(0, "a")), data_.substr(0, kPage));
  EXPECT_EQ(SourceReads(), 1u);  // b's own; a was only asked what it had.
  EXPECT_EQ(good_->calls(), 1);
  EXPECT_EQ(a_->service->Stats().misses, 0u);
  EXPECT_EQ(b_->service->Stats().peer_fill_failures, 1u);
  EXPECT_EQ(b_->service->Stats().peer_fills, 0u);
}

TEST_F(PeerFillTest, UnknownOrSelfPeersAreNotAsked) {
  EXPECT_EQ(Read(a_.get(), Request(0, "")), data_.substr(0, kPage));
  EXPECT_EQ(Read(b_.get(), Request(0, "nobody")), data_.substr(0, kPage));
  EXPECT_EQ(SourceReads(), 2u);
  EXPECT_EQ(good_->calls(), 0);
  EXPECT_EQ(peers_->Get("b"), nullptr);  // Never its own peer.
  EXPECT_EQ(peers_->size(), 2u);
}

TEST_F(PeerFillTest, BytesThatDoNotMatchThePeersChecksumsAreNotKept) {
  EXPECT_EQ(Read(a_.get(), Request(0, "")), data_.substr(0, kPage));
  EXPECT_EQ(Read(b_.get(), Request(0, "liar")), data_.substr(0, kPage));
  EXPECT_EQ(bad_->calls(), 1);
  EXPECT_EQ(SourceReads(), 2u);
  EXPECT_EQ(b_->service->Stats().peer_fill_failures, 1u);
  ASSERT_TRUE(Cached(b_.get(), 0));
  EXPECT_EQ(Read(b_.get(), Request(0, "")), data_.substr(0, kPage));  // The source's bytes.
}

TEST_F(PeerFillTest, AChangedObjectIsNotCopiedFromAnOldVersion) {
  EXPECT_EQ(Read(a_.get(), Request(0, "")), data_.substr(0, kPage));
  auto old_request = Request(0, "a");
  data_ = RandomBytes(data_.size(), 12);
  memory_->Put("obj", data_);
  // The new version: a has nothing for it, so b reads the source.
  EXPECT_EQ(Read(b_.get(), Request(0, "a")), data_.substr(0, kPage));
  EXPECT_EQ(b_->service->Stats().peer_fills, 0u);
  // The old version is still a's to give (same version key): b copies it, never mixing them.
  auto old = b_->service->ReadPage(old_request);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(b_->service->Stats().peer_fills, 1u);
}

TEST(PeerSetTest, KeepsChannelsOfUnchangedPeersAndDropsTheOthers) {
  int made = 0;
  PeerSet peers("self", [&made](const std::string& address) {
    ++made;
    return std::shared_ptr<protocol::PageChannel>(
        new Relay(nullptr, false));  // Never used to read here.
  });
  peers.SetPeers({{"self", "h0:1"}, {"w1", "h1:1"}, {"w2", "h2:1"}, {"w3", ""}});
  EXPECT_EQ(peers.size(), 2u);  // Not itself, not a record without an address.
  EXPECT_EQ(made, 0);           // Channels are made on first use.
  auto w1 = peers.Get("w1");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(peers.Get("w1"), w1);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(peers.Get("self"), nullptr);
  EXPECT_EQ(peers.Get("w9"), nullptr);
  peers.SetPeers({{"w1", "h1:1"}, {"w2", "h2:2"}});
  EXPECT_EQ(peers.Get("w1"), w1);  // Same address: same channel.
  ASSERT_NE(peers.Get("w2"), nullptr);
  EXPECT_EQ(made, 2);
  peers.SetPeers({{"w1", "h9:1"}});  // Moved: a new channel; the old one lives while held.
  EXPECT_NE(peers.Get("w1"), w1);
  EXPECT_EQ(peers.Get("w2"), nullptr);
  EXPECT_EQ(made, 3);
}

}  // namespace
}  // namespace cairn::worker
