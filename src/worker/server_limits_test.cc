// The server's defences against clients that misbehave (docs/protocol.md "Server limits"): each
// test has one client do something that used to stall or exhaust the worker, and checks that
// another client is still served.
#include <dirent.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <future>
#include <thread>

#include "common/checksum.h"
#include "testing/gate.h"
#include "testing/frames.h"
#include "testing/gated_ufs.h"
#include "testing/test_util.h"
#include "transport/remote_channel.h"
#include "ufs/memory_ufs.h"
#include "worker/server.h"
#include "worker/write_service.h"

namespace cairn::worker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::SendFrame;
constexpr uint32_t kPage = 256 << 10;
constexpr int kPages = 200;

size_t ThreadsInProcess() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

class ServerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    data_ = testing::RandomBytes(size_t{kPage} * kPages, 7);
    memory_->Put("big", data_);
    memory_->Put("other", testing::RandomBytes(kPage, 8));
    gated_ = std::make_shared<testing::GatedUnderStorage>(memory_);
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    out_ = std::make_shared<testing::GatedUnderStorage>(
        std::make_shared<ufs::MemoryUnderStorage>("mem://out"));
    MountSpec out;
    out.path = "/out";
    out.uri = "mem://out";
    out.read_only = false;
    auto mounts = mount::MountTable::CreateWith({spec, out}, {gated_, out_});
    ASSERT_TRUE(mounts.ok());
    pagestore::PageStoreOptions so;
    so.dirs.push_back({dir_.str(), 256ull << 20});
    so.page_size = kPage;
    store_ = std::move(pagestore::PageStore::Create(so)).value();
    PageServiceOptions po;
    po.page_size = kPage;
    po.unknown_mount_wait = seconds(2);
    po.source_read_bytes = 0;  // One source read per miss: each miss thread holds its own.
    service_ = std::make_unique<PageService>(*mounts, store_.get(), &registry_, po);
    options_.host = "127.0.0.1";
    options_.port = 0;
    options_.miss_threads = 4;
  }
  void TearDown() override {
    if (gate_) gate_->Open();
    if (commit_gate_) commit_gate_->Open();
    server_.reset();
    writes_.reset();
    service_.reset();
  }

  // Takes writes to /out from here on (before StartServer).
  void TakeWrites() {
    WriteServiceOptions wo;
    wo.spool_dirs = {(dir_.path() / "spool").string()};
    auto writes = WriteService::Create(service_.get(), wo);
    ASSERT_TRUE(writes.ok()) << writes.status().ToString();
    writes_ = std::move(writes).value();
    options_.writes = writes_.get();
  }

  static Status SendWrite(net::Stream* s, uint64_t id, const protocol::WriteRequest& request) {
    std::string payload = protocol::EncodeWriteRequest(request);
    if (const auto* page = std::get_if<protocol::WritePageRequest>(&request)) {
      payload.append(page->data.data(), page->data.size());
    }
    return SendFrame(s, protocol::TypeOf(request), id, payload);
  }
  // Opens `path` (create, truncate) on `s` as request 1; its handle, or 0 after a failure.
  static uint64_t OpenOn(net::Stream* s, const std::string& path) {
    protocol::OpenWriteRequest open;
    open.path = path;
    open.create = true;
    open.truncate = true;
    EXPECT_TRUE(SendWrite(s, 1, open).ok());
    auto opened = testing::ReadFrame(s);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return 0;
    auto reply = protocol::DecodeWriteReply(opened->second);
    EXPECT_TRUE(reply.ok() && reply->status == StatusCode::kOk);
    return reply.ok() && reply->status == StatusCode::kOk ? reply->handle : 0;
  }
  // The next reply on `s`, whatever its kind: its id and status.
  static StatusOr<std::pair<uint64_t, StatusCode>> NextReply(net::Stream* s) {
    CAIRN_ASSIGN_OR_RETURN(auto frame, testing::ReadFrame(s));
    if (frame.first.type == protocol::MessageType::kWriteReply) {
      CAIRN_ASSIGN_OR_RETURN(protocol::WriteReply reply, protocol::DecodeWriteReply(frame.second));
      return std::pair(frame.first.request_id, reply.status);
    }
    std::span<const char> data;
    CAIRN_ASSIGN_OR_RETURN(protocol::PageReplyMeta meta,
                           protocol::DecodePageReply(frame.second, &data));
    return std::pair(frame.first.request_id, meta.status);
  }

  void StartServer() {
    auto s = WorkerServer::Start(service_.get(), options_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }

  void HoldSourceReads() {
    gate_ = std::make_shared<testing::Gate>();
    gated_->set_gate(gate_);
  }

  std::unique_ptr<net::Stream> Connect() {
    auto s = net::ConnectTcp("127.0.0.1:" + std::to_string(server_->port()), seconds(2));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    (*s)->SetReadTimeout(seconds(10));
    return std::move(s).value();
  }

  // Sends `n` pipelined reads of whole pages of "big" (ids 1..n) without reading a reply.
  void PipelineReads(net::Stream* s, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(testing::SendRequest(s, i + 1, Request("big", i % kPages, kPage)).ok());
    }
  }

  protocol::ReadPageRequest Request(const std::string& key, uint64_t page, uint32_t length,
                                    const std::string& mount = "/lake") {
    auto info = memory_->Stat(key);
    protocol::ReadPageRequest r;
    r.page.page_size = kPage;
    r.page.mount = mount;
    r.page.key = key;
    r.page.version = info.ok() ? info->version : "v";
    r.page.object_size = info.ok() ? info->size : kPage;
    r.page.page_index = page;
    r.offset = 0;
    r.length = length;
    return r;
  }

  struct Answer {
    uint64_t id = 0;
    protocol::PageReplyMeta meta;
    std::string data;
  };
  static StatusOr<Answer> ReadReply(net::Stream* s) {
    CAIRN_ASSIGN_OR_RETURN(auto frame, testing::ReadFrame(s));
    Answer a;
    a.id = frame.first.request_id;
    std::span<const char> data;
    CAIRN_ASSIGN_OR_RETURN(a.meta, protocol::DecodePageReply(frame.second, &data));
    a.data.assign(data.begin(), data.end());
    return a;
  }

  // One read on a fresh connection; the elapsed time through `took`.
  StatusOr<Answer> ReadOnce(const protocol::ReadPageRequest& r, milliseconds* took = nullptr) {
    auto start = std::chrono::steady_clock::now();
    auto s = Connect();
    if (s == nullptr) return UnavailableError("no connection");
    CAIRN_RETURN_IF_ERROR(
        SendFrame(s.get(), protocol::MessageType::kReadPage, 1, EncodeRequest(r)));
    auto answer = ReadReply(s.get());
    if (took) {
      *took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    }
    return answer;
  }

  // True once `s` is closed by the server (reads EOF), within `limit`.
  static bool ClosedWithin(net::Stream* s, milliseconds limit) {
    s->SetReadTimeout(limit);
    std::array<char, 1> byte;
    return s->ReadFull(byte).code() == StatusCode::kUnavailable;
  }

  testing::TempDir dir_{"srv-limits"};
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<testing::GatedUnderStorage> gated_;
  std::shared_ptr<testing::GatedUnderStorage> out_;  // The writable mount /out.
  std::shared_ptr<testing::Gate> gate_;
  std::shared_ptr<testing::Gate> commit_gate_;  // Set by a test that holds commits in /out.
  std::string data_;
  std::unique_ptr<pagestore::PageStore> store_;
  metrics::Registry registry_;
  std::unique_ptr<PageService> service_;
  std::unique_ptr<WriteService> writes_;
  ServerOptions options_;
  std::unique_ptr<WorkerServer> server_;
};

// Regression: a client that pipelined 200 misses and never read its replies blocked every
// miss thread in a socket write, so another client's miss got no answer.
TEST_F(ServerLimitsTest, AClientThatDoesNotReadItsRepliesDoesNotStallOthers) {
  options_.send_timeout = seconds(30);  // Longer than the test: only the design can save B.
  StartServer();
  auto a = Connect();
  PipelineReads(a.get(), kPages);
  // Let A's replies fill every socket buffer between the worker and A.
  std::this_thread::sleep_for(milliseconds(500));
  milliseconds took{};
  auto b = ReadOnce(Request("other", 0, kPage), &took);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->meta.status, StatusCode::kOk);
  EXPECT_EQ(b->data.size(), kPage);
  EXPECT_LT(took, seconds(3));
}

TEST_F(ServerLimitsTest, AClientThatStopsReadingIsDisconnectedAfterTheSendTimeout) {
  options_.send_timeout = milliseconds(300);
  StartServer();
  auto a = Connect();
  PipelineReads(a.get(), kPages);
  for (int i = 0; i < 200 && server_->Stats().timed_out == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(server_->Stats().timed_out, 1u);
  auto b = ReadOnce(Request("other", 0, kPage));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->data.size(), kPage);
}

// Regression: the miss queue was unbounded (300,000 pipelined requests grew the worker by
// 300 MB). Now a connection's reader stops at max_outstanding_per_connection.
TEST_F(ServerLimitsTest, PipelinedMissesAreBoundedPerConnection) {
  options_.max_outstanding_per_connection = 16;
  StartServer();
  HoldSourceReads();
  auto a = Connect();
  std::thread sender([&] {
    // More than the server takes: the rest stays in socket buffers (or blocks this thread,
    // which the close below releases).
    for (int i = 0; i < 3000; ++i) {
      if (!SendFrame(a.get(), protocol::MessageType::kReadPage, i + 1,
                     EncodeRequest(Request("big", i % kPages, 1)))
               .ok()) {
        return;
      }
    }
  });
  ASSERT_TRUE(gate_->WaitForArrivals(4));  // Every miss thread holds a source read.
  std::this_thread::sleep_for(milliseconds(300));
  // 4 running + 12 queued: the 16 the connection may have outstanding.
  EXPECT_EQ(server_->Stats().queued_requests, 12u);
  EXPECT_EQ(gate_->arrivals(), 4u);
  gate_->Open();
  a->Shutdown();
  sender.join();
}

// Regression: every connection got a thread with no timeout and no cap (500 silent
// connections = 500 threads). Past the cap, silent connections make room for new ones.
TEST_F(ServerLimitsTest, SilentConnectionsCannotLockOutClientsOrGrowThreadsWithoutBound) {
  options_.max_connections = 16;
  options_.handshake_timeout = seconds(60);  // Longer than the test: the cap must do it.
  StartServer();
  size_t threads_before = ThreadsInProcess();
  std::vector<std::unique_ptr<net::Stream>> silent;
  for (int i = 0; i < 100; ++i) silent.push_back(Connect());
  // Every connection is taken in the end, each past the 16th by closing an older silent one;
  // their threads exit (two per connection at most are left).
  auto settled = [&] {
    ServerStats st = server_->Stats();
    return st.accepted == 100 && st.connections <= 16 &&
           ThreadsInProcess() <= threads_before + 2 * 16;
  };
  for (int i = 0; i < 500 && !settled(); ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_LE(server_->Stats().connections, 16u);
  EXPECT_EQ(server_->Stats().refused, 84u);
  EXPECT_LE(ThreadsInProcess(), threads_before + 2 * 16);
  milliseconds took{};
  auto b = ReadOnce(Request("other", 0, kPage), &took);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->data.size(), kPage);
  EXPECT_LT(took, seconds(3));
}

TEST_F(ServerLimitsTest, AtTheCapWithEveryConnectionInUseANewOneIsRefused) {
  options_.max_connections = 2;
  StartServer();
  std::vector<std::unique_ptr<net::Stream>> clients;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(Connect());
    ASSERT_TRUE(SendFrame(clients.back().get(), protocol::MessageType::kPing, 1, "").ok());
    std::array<char, protocol::kFrameHeaderSize> pong;
    ASSERT_TRUE(clients.back()->ReadFull(pong).ok());
  }
  auto third = Connect();
  EXPECT_TRUE(ClosedWithin(third.get(), seconds(5)));
  EXPECT_EQ(server_->Stats().refused, 1u);
  // The two in use still work.
  for (auto& c : clients) {
    ASSERT_TRUE(SendFrame(c.get(), protocol::MessageType::kReadPage, 2,
                          EncodeRequest(Request("other", 0, 100)))
                    .ok());
    auto reply = ReadReply(c.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->meta.status, StatusCode::kOk);
  }
}

TEST_F(ServerLimitsTest, ConnectionsWithoutRequestsOrIdleAreClosed) {
  options_.handshake_timeout = milliseconds(200);
  options_.idle_timeout = milliseconds(400);
  StartServer();
  auto silent = Connect();
  EXPECT_TRUE(ClosedWithin(silent.get(), seconds(5)));
  auto idle = Connect();
  ASSERT_TRUE(SendFrame(idle.get(), protocol::MessageType::kPing, 1, "").ok());
  std::array<char, protocol::kFrameHeaderSize> pong;
  ASSERT_TRUE(idle->ReadFull(pong).ok());
  EXPECT_TRUE(ClosedWithin(idle.get(), seconds(5)));
  EXPECT_EQ(server_->Stats().timed_out, 2u);
}

// Idle connections are closed by the client before the worker's idle timeout, and a read after
// either kind of close just opens a new connection (no error, no failover).
TEST_F(ServerLimitsTest, ReadsAfterIdleClosesOnEitherSideSucceed) {
  options_.idle_timeout = milliseconds(300);
  StartServer();
  for (auto client_idle : {milliseconds(100), milliseconds(0)}) {
    transport::RemoteChannelOptions ro;
    ro.address = "127.0.0.1:" + std::to_string(server_->port());
    ro.page_size = kPage;
    ro.connections = 1;
    ro.idle_close = client_idle;
    ro.short_circuit = false;
    transport::RemoteChannel channel(ro);
    for (int round = 0; round < 3; ++round) {
      std::string buf(kPage, '\0');
      std::promise<StatusOr<protocol::PageReply>> p;
      channel.Call(Request("other", 0, kPage), buf,
                   [&p](StatusOr<protocol::PageReply> r) { p.set_value(std::move(r)); });
      auto reply = p.get_future().get();
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      EXPECT_EQ(buf, *memory_->Get("other"));
      EXPECT_FALSE(channel.suspect());
      std::this_thread::sleep_for(milliseconds(700));
    }
  }
  EXPECT_GE(server_->Stats().accepted, 6u);  // Every round after an idle close reconnected.
}

// Regression: a request naming an unknown mount held a miss thread for the whole mount wait
// (2 s), so a few of them stopped every miss.
TEST_F(ServerLimitsTest, RequestsForUnknownMountsDoNotHoldMissThreads) {
  options_.miss_threads = 1;
  options_.mount_wait_threads = 1;
  StartServer();
  auto a = Connect();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(SendFrame(a.get(), protocol::MessageType::kReadPage, i + 1,
                          EncodeRequest(Request("other", 0, 100, "/nope")))
                    .ok());
  }
  std::this_thread::sleep_for(milliseconds(100));
  milliseconds took{};
  auto b = ReadOnce(Request("other", 0, kPage), &took);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->meta.status, StatusCode::kOk);
  EXPECT_LT(took, milliseconds(1500));  // One mount wait is 2 s; five are 10 s.
  auto first = ReadReply(a.get());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->meta.status, StatusCode::kUnavailable);
}

// Hits and requests that never read the source are served inline: with every miss thread held
// by a source read, a cached page and a replica lookup (PeerRead) are still answered at once.
// (A lookup waiting behind misses could deadlock two workers looking on each other.)
TEST_F(ServerLimitsTest, HitsAndReplicaLookupsAreAnsweredWhileEveryMissThreadWaits) {
  options_.miss_threads = 1;
  StartServer();
  auto warm = ReadOnce(Request("other", 0, kPage));
  ASSERT_TRUE(warm.ok() && warm->meta.status == StatusCode::kOk);
  for (int i = 0;
       i < 200 && !store_->Contains({"mem://lake/other", memory_->Stat("other")->version, 0});
       ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  HoldSourceReads();
  auto a = Connect();
  ASSERT_TRUE(testing::SendRequest(a.get(), 1, Request("big", 3, kPage)).ok());
  ASSERT_TRUE(gate_->WaitForArrivals(1));  // The only miss thread waits for the source.

  auto hit = ReadOnce(Request("other", 0, kPage));
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->meta.status, StatusCode::kOk);
  EXPECT_EQ(hit->data, memory_->Get("other").value());

  auto b = Connect();
  protocol::PeerReadRequest lookup;
  lookup.page = Request("big", 7, kPage).page;
  ASSERT_TRUE(SendFrame(b.get(), protocol::MessageType::kPeerRead, 9, EncodeRequest(lookup)).ok());
  auto answer = ReadReply(b.get());
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->meta.status, StatusCode::kOk);
  EXPECT_TRUE(answer->data.empty());  // Not cached here: said at once, the source not asked.
  EXPECT_EQ(gate_->arrivals(), 1u);
  gate_->Open();
  auto miss = ReadReply(a.get());
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(miss->data, data_.substr(3 * size_t{kPage}, kPage));
}

// A request that waited for a miss thread longer than its deadline is answered
// DeadlineExceeded without reading the source (the client has given up on it). The server's
// clock is injected: the wait is a step of a fake clock, not a sleep.
TEST_F(ServerLimitsTest, ARequestThatExpiredInTheQueueIsRefusedNotServed) {
  FakeClock clock;
  options_.clock = &clock;
  options_.miss_threads = 1;
  StartServer();
  HoldSourceReads();
  auto s = Connect();
  ASSERT_TRUE(testing::SendRequest(s.get(), 1, Request("big", 3, kPage)).ok());
  ASSERT_TRUE(gate_->WaitForArrivals(1));  // The only miss thread waits for the source.
  protocol::ReadPageRequest late = Request("big", 5, kPage);
  late.deadline_ms = 100;
  ASSERT_TRUE(testing::SendRequest(s.get(), 2, late).ok());
  for (int i = 0; i < 400 && server_->Stats().queued_requests == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(server_->Stats().queued_requests, 1u);
  clock.Advance(milliseconds(101));
  gate_->Open();
  for (int i = 0; i < 2; ++i) {
    auto reply = ReadReply(s.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    if (reply->id == 1) {
      EXPECT_EQ(reply->meta.status, StatusCode::kOk);
      EXPECT_EQ(reply->data, data_.substr(3 * size_t{kPage}, kPage));
    } else {
      EXPECT_EQ(reply->meta.status, StatusCode::kDeadlineExceeded) << reply->meta.error_message;
      EXPECT_TRUE(reply->data.empty());
    }
  }
  EXPECT_EQ(gate_->arrivals(), 1u);  // Page 5 was never read from the source.
}

// Regression (heap over-read sent to the network): two pipelined requests for one page, the
// first naming object_size=1, made the second's reply a range of the first's 1-byte buffer.
TEST_F(ServerLimitsTest, PipelinedRequestsNamingOtherSizesGetOnlyBytesThatExist) {
  StartServer();
  HoldSourceReads();
  auto s = Connect();
  protocol::ReadPageRequest liar = Request("other", 0, 1);
  liar.page.object_size = 1;
  protocol::ReadPageRequest honest = Request("other", 0, kPage);
  ASSERT_TRUE(SendFrame(s.get(), protocol::MessageType::kReadPage, 1, EncodeRequest(liar)).ok());
  ASSERT_TRUE(gate_->WaitForArrivals(1));
  ASSERT_TRUE(SendFrame(s.get(), protocol::MessageType::kReadPage, 2, EncodeRequest(honest)).ok());
  ASSERT_TRUE(gate_->WaitForArrivals(2));
  gate_->Open();
  for (int i = 0; i < 2; ++i) {
    auto reply = ReadReply(s.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    if (reply->id == 1) {
      EXPECT_EQ(reply->meta.status, StatusCode::kFailedPrecondition);
      EXPECT_TRUE(reply->data.empty());
    } else {
      ASSERT_EQ(reply->meta.status, StatusCode::kOk) << reply->meta.error_message;
      EXPECT_EQ(reply->data, *memory_->Get("other"));
      EXPECT_EQ(ChunkChecksums(reply->data), reply->meta.checksums);
    }
  }
}

}  // namespace
}  // namespace cairn::worker

namespace cairn::worker {
namespace {

// Regression: a write of a file whose commit was uploading (a sync held in the source) was
// served on the connection's reader, which waited for the commit: every request behind it on
// the connection (reads of other files too) got no answer until the upload ended, and timed
// out. Now it waits for the commit off the reader.
TEST_F(ServerLimitsTest, AWriteOfAFileBeingCommittedDoesNotStopItsConnection) {
  TakeWrites();
  StartServer();
  auto s = Connect();
  s->SetReadTimeout(seconds(5));
  commit_gate_ = std::make_shared<testing::Gate>();
  std::shared_ptr<testing::Gate> commits = commit_gate_;
  out_->set_commit_gate(commits);  // The writers of files opened from here on.
  const uint64_t handle = OpenOn(s.get(), "/out/ckpt");
  ASSERT_NE(handle, 0u);
  ASSERT_TRUE(SendWrite(s.get(), 2, testing::WritePageOf(handle, 0, "abc")).ok());
  auto wrote = NextReply(s.get());
  ASSERT_TRUE(wrote.ok() && wrote->second == StatusCode::kOk);

  ASSERT_TRUE(SendWrite(s.get(), 3, protocol::SyncWriteRequest{0, handle}).ok());
  ASSERT_TRUE(commits->WaitForArrivals(1));
  // While the commit is held: a write and a read-back of the same file, a keep-alive, and a
  // read of another file, all on the same connection.
  ASSERT_TRUE(SendWrite(s.get(), 4, testing::WritePageOf(handle, 3, "def")).ok());
  ASSERT_TRUE(SendWrite(s.get(), 5, protocol::ReadWrittenRequest{0, handle, 0, 6}).ok());
  ASSERT_TRUE(SendWrite(s.get(), 6, protocol::KeepWriteRequest{0, handle}).ok());
  ASSERT_TRUE(testing::SendRequest(s.get(), 7, Request("other", 0, kPage)).ok());
  std::map<uint64_t, StatusCode> answered;
  for (int i = 0; i < 2; ++i) {
    auto reply = NextReply(s.get());
    ASSERT_TRUE(reply.ok()) << "no answer while the commit is held: " << reply.status().ToString();
    answered[reply->first] = reply->second;
  }
  EXPECT_EQ(answered, (std::map<uint64_t, StatusCode>{{6, StatusCode::kOk}, {7, StatusCode::kOk}}));

  commits->Open();
  for (int i = 0; i < 3; ++i) {
    auto reply = NextReply(s.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    answered[reply->first] = reply->second;
  }
  for (uint64_t id : {3, 4, 5}) EXPECT_EQ(answered[id], StatusCode::kOk) << "request " << id;
  ASSERT_TRUE(SendWrite(s.get(), 8, protocol::CloseWriteRequest{0, handle}).ok());
  auto closed = NextReply(s.get());
  ASSERT_TRUE(closed.ok() && closed->second == StatusCode::kOk);
  EXPECT_EQ(testing::ObjectContent(*out_, "ckpt"), "abcdef");
}

// The copies of writes waiting for their file's commit are bounded per connection (32 MiB):
// past that the reader waits, as it did for the commit itself before, and a write it held for
// longer than a client waits is refused.
TEST_F(ServerLimitsTest, WritesWaitingForTheirFilesCommitAreBounded) {
  TakeWrites();
  StartServer();
  auto s = Connect();
  s->SetReadTimeout(seconds(10));
  commit_gate_ = std::make_shared<testing::Gate>();
  out_->set_commit_gate(commit_gate_);
  const uint64_t handle = OpenOn(s.get(), "/out/big");
  ASSERT_NE(handle, 0u);
  ASSERT_TRUE(SendWrite(s.get(), 2, protocol::SyncWriteRequest{0, handle}).ok());
  ASSERT_TRUE(commit_gate_->WaitForArrivals(1));
  constexpr int kWrites = 40;  // 1 MiB each: more than the bound.
  const std::string block = testing::RandomBytes(1 << 20, 5);
  protocol::WritePageRequest write = testing::WritePageOf(handle, 0, block);  // Checksummed once.
  std::thread sender([&] {
    for (int i = 0; i < kWrites; ++i) {
      write.offset = uint64_t{block.size()} * i;
      if (!SendWrite(s.get(), 10 + i, write).ok()) return;
    }
    (void)testing::SendRequest(s.get(), 100, Request("other", 0, kPage));
  });
  // The reader stops at the bound, holding the next write: the read behind it is not answered.
  ASSERT_TRUE(testing::WaitUntil([&] { return server_->Stats().parked_write_bytes >= 32u << 20; }));
  std::this_thread::sleep_for(milliseconds(1200));  // Past the 1 s a held write may wait.
  EXPECT_EQ(server_->Stats().parked_write_bytes, 32u << 20);
  s->SetReadTimeout(milliseconds(200));
  EXPECT_FALSE(NextReply(s.get()).ok());
  commit_gate_->Open();
  s->SetReadTimeout(seconds(10));
  std::map<uint64_t, StatusCode> answered;
  for (int i = 0; i < kWrites + 2; ++i) {
    auto reply = NextReply(s.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    answered[reply->first] = reply->second;
  }
  sender.join();
  EXPECT_EQ(answered.size(), size_t{kWrites + 2});
  // The write the reader held past 1 s is refused, not applied (its client may have sent it
  // again elsewhere by then); the rest went through.
  int refused = 0;
  for (const auto& [id, code] : answered) {
    if (code == StatusCode::kDeadlineExceeded && id >= 10 && id < 10 + kWrites) {
      ++refused;
    } else {
      EXPECT_EQ(code, StatusCode::kOk) << "request " << id;
    }
  }
  EXPECT_GE(refused, 1);
}

}  // namespace
}  // namespace cairn::worker
