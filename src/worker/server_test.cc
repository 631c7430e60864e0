#include "worker/server.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>
#include <set>

#include "common/checksum.h"
#include "testing/frames.h"
#include "transport/remote_channel.h"
#include "ufs/memory_ufs.h"
#include "worker/worker.h"

namespace cairn::worker {
namespace {

using testing::ReadFrame;
using testing::SendFrame;

constexpr uint32_t kPage = 1 << 20;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cairn-srv-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    memory_->Put("file.bin", std::string(kPage + 4096, 'z'));
    WorkerOptions o;
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    o.mounts = {spec};
    o.ufs_override = {memory_};
    o.config.listen = "127.0.0.1:0";
    o.config.metrics_listen = "127.0.0.1:0";
    o.config.cache_dirs.push_back({dir_.string(), 64ull << 20});
    auto w = Worker::Start(o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    worker_ = std::move(w).value();
  }
  void TearDown() override {
    worker_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<net::Stream> Connect() {
    auto s =
        net::ConnectTcp("127.0.0.1:" + std::to_string(worker_->port()), std::chrono::seconds(2));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    (*s)->SetReadTimeout(std::chrono::seconds(5));
    return std::move(s).value();
  }

  protocol::ReadPageRequest Request(uint64_t page, uint32_t offset, uint32_t length) {
    protocol::ReadPageRequest r;
    r.page.page_size = kPage;
    r.page.mount = "/lake";
    r.page.key = "file.bin";
    r.page.version = memory_->Stat("file.bin")->version;
    r.page.object_size = kPage + 4096;
    r.page.page_index = page;
    r.offset = offset;
    r.length = length;
    return r;
  }

  std::filesystem::path dir_;
  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::unique_ptr<Worker> worker_;
};

TEST_F(ServerTest, AnswersHelloPingAndPipelinedReads) {
  auto s = Connect();
  ASSERT_TRUE(
      SendFrame(s.get(), protocol::MessageType::kHello, 1, protocol::EncodeHelloRequest({})).ok());
  auto hello = ReadFrame(s.get());
  ASSERT_TRUE(hello.ok());
  auto decoded = protocol::DecodeHelloReply(hello->second);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->page_size, kPage);

  // Two requests back to back; replies carry their ids.
  ASSERT_TRUE(SendFrame(s.get(), protocol::MessageType::kReadPage, 7,
                        protocol::EncodeRequest(Request(0, 0, 4096)))
                  .ok());
  ASSERT_TRUE(SendFrame(s.get(), protocol::MessageType::kReadPage, 8,
                        protocol::EncodeRequest(Request(1, 0, 4096)))
                  .ok());
  std::set<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    auto reply = ReadFrame(s.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    std::span<const char> view;
    auto meta = protocol::DecodePageReply(reply->second, &view);
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    ASSERT_EQ(meta->status, StatusCode::kOk) << meta->error_message;
    std::string data(view.begin(), view.end());
    EXPECT_EQ(data.size(), meta->data_length);
    EXPECT_EQ(ChunkChecksums(data), meta->checksums);
    EXPECT_EQ(data, std::string(data.size(), 'z'));
    ids.insert(reply->first.request_id);
  }
  EXPECT_EQ(ids, (std::set<uint64_t>{7, 8}));
  ASSERT_TRUE(SendFrame(s.get(), protocol::MessageType::kPing, 9, "").ok());
  auto pong = ReadFrame(s.get());
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->first.type, protocol::MessageType::kPong);
}

TEST_F(ServerTest, ErrorsAreRepliesNotDisconnects) {
  auto s = Connect();
  auto r = Request(0, 0, 10);
  r.page.mount = "/missing";
  ASSERT_TRUE(
      SendFrame(s.get(), protocol::MessageType::kReadPage, 3, protocol::EncodeRequest(r)).ok());
  auto reply = ReadFrame(s.get());
  ASSERT_TRUE(reply.ok());
  std::span<const char> view;
  auto meta = protocol::DecodePageReply(reply->second, &view);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->status, StatusCode::kUnavailable);  // Unknown mount: try elsewhere.
  ASSERT_TRUE(SendFrame(s.get(), protocol::MessageType::kPing, 4, "").ok());
  EXPECT_TRUE(ReadFrame(s.get()).ok());
}

TEST_F(ServerTest, GarbageFrameClosesOnlyThatConnection) {
  auto bad = Connect();
  auto good = Connect();
  std::string garbage(64, 'x');
  std::array<std::span<const char>, 1> bufs{std::span<const char>(garbage)};
  ASSERT_TRUE(bad->WriteAll(bufs).ok());
  char c;
  EXPECT_FALSE(bad->ReadFull(std::span<char>(&c, 1)).ok());
  // A truncated frame: header promises a payload that never comes, then the client closes.
  auto truncated = Connect();
  std::array<char, protocol::kFrameHeaderSize> raw;
  protocol::EncodeFrameHeader({protocol::MessageType::kReadPage, 0, 1, 500}, raw.data());
  std::array<std::span<const char>, 1> hb{std::span<const char>(raw)};
  ASSERT_TRUE(truncated->WriteAll(hb).ok());
  truncated.reset();
  ASSERT_TRUE(SendFrame(good.get(), protocol::MessageType::kPing, 1, "").ok());
  EXPECT_TRUE(ReadFrame(good.get()).ok());
}

// Over TCP, a lookup of a page the worker does not have is a clean "not here" (OK, no data), not
// an error: replica lookups and peer fills rely on telling the two apart.
TEST_F(ServerTest, RemoteChannelGetsALookupMissAsAnEmptyAnswer) {
  transport::RemoteChannelOptions ro;
  ro.address = "127.0.0.1:" + std::to_string(worker_->port());
  ro.page_size = kPage;
  ro.short_circuit = false;
  transport::RemoteChannel channel(ro);
  auto read = [&](bool lookup, std::string* out) {
    protocol::ReadPageRequest r = Request(0, 0, 4096);
    protocol::Request request = r;
    if (lookup) request = protocol::LookupPageRequest{{r.deadline_ms, r.page}, r.offset, r.length};
    out->assign(protocol::AlignedRange(0, 4096, kPage).size(), '\0');
    std::promise<StatusOr<protocol::PageReply>> done;
    channel.Call(request, *out, [&done](StatusOr<protocol::PageReply> reply) {
      done.set_value(std::move(reply));
    });
    return done.get_future().get();
  };
  std::string bytes;
  auto miss = read(true, &bytes);
  ASSERT_TRUE(miss.ok()) << miss.status().ToString();
  EXPECT_EQ(miss->data_length, 0u);
  EXPECT_EQ(miss->source, protocol::PageSource::kUnderStorage);
  auto fetched = read(false, &bytes);  // A plain read caches it.
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_EQ(bytes, std::string(bytes.size(), 'z'));
  StatusOr<protocol::PageReply> hit = UnavailableError("not tried");
  for (int i = 0; i < 500; ++i) {  // The page is written in the background.
    hit = read(true, &bytes);
    if (!hit.ok() || hit->data_length != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->source, protocol::PageSource::kCache);
  EXPECT_EQ(hit->data_length, bytes.size());
  EXPECT_EQ(bytes, std::string(bytes.size(), 'z'));
}

// A peer of another protocol version gets a kVersionMismatch frame naming both versions, then
// the connection closes; other connections are unaffected.
TEST_F(ServerTest, AnotherProtocolVersionIsRefusedWithAClearMessage) {
  for (bool old_frame : {true, false}) {
    auto s = Connect();
    std::array<char, protocol::kFrameHeaderSize> raw;
    std::string hello = protocol::EncodeHelloRequest({1, 1, ""});
    protocol::EncodeFrameHeader(
        {protocol::MessageType::kHello, 0, 1, static_cast<uint32_t>(hello.size())}, raw.data());
    if (old_frame) {  // A v1 client: its frames carry version 1.
      raw[4] = 1;
      uint32_t check = static_cast<uint32_t>(Hash64(std::string_view(raw.data(), 20)));
      std::memcpy(raw.data() + 20, &check, 4);
    }
    std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                              std::span<const char>(hello)};
    ASSERT_TRUE(s->WriteAll(bufs).ok());
    auto reply = ReadFrame(s.get());
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_EQ(reply->first.type, protocol::MessageType::kVersionMismatch);
    auto mismatch = protocol::DecodeVersionMismatch(reply->second);
    ASSERT_TRUE(mismatch.ok());
    EXPECT_EQ(mismatch->max_version, protocol::kVersion);
    EXPECT_NE(mismatch->message.find("v1"), std::string::npos) << mismatch->message;
    EXPECT_NE(mismatch->message.find("v" + std::to_string(protocol::kVersion)), std::string::npos)
        << mismatch->message;
    char c;
    EXPECT_FALSE(s->ReadFull(std::span<char>(&c, 1)).ok());  // Closed.
  }
  auto good = Connect();
  ASSERT_TRUE(SendFrame(good.get(), protocol::MessageType::kPing, 1, "").ok());
  EXPECT_TRUE(ReadFrame(good.get()).ok());
}

// The client side: a worker that speaks another version makes every call fail with a message
// that says so (and the reader falls back to the source), instead of garbage or a hang.
TEST(RemoteChannelVersionTest, AWorkerOfAnotherVersionIsReportedClearly) {
  auto listener = net::Listener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  std::thread fake_worker([&] {
    auto conn = (*listener)->Accept();
    if (!conn.ok()) return;
    std::array<char, protocol::kFrameHeaderSize> raw;
    if (!(*conn)->ReadFull(raw).ok()) return;
    protocol::VersionMismatch m{9, 9, "worker w9 speaks Cairn protocol v9"};
    std::string payload = protocol::EncodeVersionMismatch(m);
    protocol::EncodeFrameHeader(
        {protocol::MessageType::kVersionMismatch, 0, 0, static_cast<uint32_t>(payload.size())},
        raw.data());
    std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                              std::span<const char>(payload)};
    (*conn)->WriteAll(bufs).IgnoreError();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  transport::RemoteChannelOptions ro;
  ro.address = "127.0.0.1:" + std::to_string((*listener)->port());
  ro.page_size = kPage;
  ro.short_circuit = false;
  transport::RemoteChannel channel(ro);
  protocol::ProbePageRequest probe;
  probe.page.page_size = kPage;
  probe.page.mount = "/lake";
  probe.page.key = "k";
  probe.page.object_size = 1;
  std::promise<StatusOr<protocol::PageReply>> done;
  channel.Call(probe, {},
               [&done](StatusOr<protocol::PageReply> r) { done.set_value(std::move(r)); });
  auto reply = done.get_future().get();
  EXPECT_FALSE(reply.ok());
  fake_worker.join();
  EXPECT_TRUE(channel.suspect());
}

}  // namespace
}  // namespace cairn::worker
