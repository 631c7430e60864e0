// RemoteChannel against a worker played by hand over a stream pair (no real worker, no TCP), with
// a FakeClock for deadlines: every reply a worker could send, well-formed or not.
#include "transport/remote_channel.h"

#include <gtest/gtest.h>

#include <array>
#include <future>
#include <thread>

#include "common/checksum.h"
#include "common/thread_annotations.h"
#include "testing/frames.h"

namespace cairn::transport {
namespace {

using protocol::FrameHeader;
using protocol::MessageType;
using testing::SendFrame;
constexpr uint32_t kPage = 1 << 20;

class RemoteChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RemoteChannelOptions o;
    o.address = "worker-under-test";
    o.page_size = kPage;
    o.short_circuit = false;
    o.connections = 1;
    o.request_timeout = std::chrono::milliseconds(1000);
    o.clock = &clock_;
    o.connect = [this](const std::string&,
                       std::chrono::milliseconds) -> StatusOr<std::unique_ptr<net::Stream>> {
      auto pair = net::StreamPair();
      if (!pair.ok()) return pair.status();
      {
        MutexLock l(&mu_);
        worker_ends_.push_back(std::move(pair->second));
      }
      cv_.NotifyAll();
      return std::move(pair->first);
    };
    options_ = o;
  }

  // Waits for connection number `n` (from 1) and returns its worker end.
  net::Stream* Connection(size_t n) {
    MutexLock l(&mu_);
    cv_.WaitFor(&mu_, std::chrono::seconds(10),
                [&]() REQUIRES(mu_) { return worker_ends_.size() >= n; });
    return worker_ends_.size() >= n ? worker_ends_[n - 1].get() : nullptr;
  }

  // Answers the Hello on connection `n` (on another thread: the channel connects inside Call).
  std::thread AnswerHello(size_t n, uint32_t page_size = kPage) {
    return std::thread([this, n, page_size] {
      net::Stream* w = Connection(n);
      if (w == nullptr) return;
      auto hello = ReadFrame(w);
      EXPECT_TRUE(hello.ok()) << hello.status().ToString();
      if (!hello.ok()) return;
      EXPECT_EQ(hello->first.type, MessageType::kHello);
      protocol::HelloReply reply;
      reply.page_size = page_size;
      reply.worker_id = "w1";
      EXPECT_TRUE(
          SendFrame(w, MessageType::kHelloReply, 0, protocol::EncodeHelloReply(reply)).ok());
    });
  }

  static StatusOr<std::pair<FrameHeader, std::string>> ReadFrame(net::Stream* s) {
    s->SetReadTimeout(std::chrono::seconds(5));
    return testing::ReadFrame(s);
  }

  static protocol::ReadPageRequest Read(uint64_t page, uint32_t offset, uint32_t length) {
    protocol::ReadPageRequest r;
    r.page.page_size = kPage;
    r.page.mount = "/lake";
    r.page.key = "k";
    r.page.version = "v";
    r.page.object_size = 4 * kPage;
    r.page.page_index = page;
    r.offset = offset;
    r.length = length;
    return r;
  }

  // Sends `request` through the channel; the future gets the callback's result.
  std::future<StatusOr<protocol::PageReply>> Call(RemoteChannel& channel,
                                                  const protocol::Request& request,
                                                  std::span<char> dest) {
    auto promise = std::make_shared<std::promise<StatusOr<protocol::PageReply>>>();
    auto future = promise->get_future();
    channel.Call(request, dest,
                 [promise](StatusOr<protocol::PageReply> r) { promise->set_value(std::move(r)); });
    return future;
  }

  static std::string DataReply(uint32_t offset, const std::string& data) {
    protocol::PageReplyMeta meta;
    meta.data_offset = offset;
    meta.data_length = static_cast<uint32_t>(data.size());
    meta.checksums = ChunkChecksums(data);
    return protocol::EncodePageReplyMeta(meta) + data;
  }

  FakeClock clock_;
  RemoteChannelOptions options_;
  Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<net::Stream>> worker_ends_ GUARDED_BY(mu_);
};

TEST_F(RemoteChannelTest, RepliesAreMatchedToRequestsByIdInAnyOrder) {
  RemoteChannel channel(options_);
  std::string a(65536, '\0'), b(65536, '\0');
  // The first call connects (Hello) before it sends: answer the Hello from another thread.
  std::thread hello = AnswerHello(1);
  auto fa = Call(channel, Read(0, 0, 100), a);
  hello.join();
  auto fb = Call(channel, Read(1, 0, 100), b);
  net::Stream* w = Connection(1);
  auto qa = ReadFrame(w);
  auto qb = ReadFrame(w);
  ASSERT_TRUE(qa.ok() && qb.ok());
  EXPECT_EQ(qa->first.type, MessageType::kReadPage);
  auto decoded = protocol::DecodeRequest(qb->first.type, qb->second);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(protocol::BaseOf(*decoded).page.page_index, 1u);
  EXPECT_EQ(protocol::BaseOf(*decoded).deadline_ms, 1000u);  // The channel's default.
  // Answer the second first.
  std::string bytes_b(65536, 'b'), bytes_a(65536, 'a');
  ASSERT_TRUE(
      SendFrame(w, MessageType::kPageReply, qb->first.request_id, DataReply(0, bytes_b)).ok());
  ASSERT_TRUE(
      SendFrame(w, MessageType::kPageReply, qa->first.request_id, DataReply(0, bytes_a)).ok());
  auto rb = fb.get();
  auto ra = fa.get();
  ASSERT_TRUE(ra.ok() && rb.ok()) << ra.status().ToString() << rb.status().ToString();
  EXPECT_EQ(a, bytes_a);
  EXPECT_EQ(b, bytes_b);
  EXPECT_EQ(rb->checksums, ChunkChecksums(bytes_b));
}

TEST_F(RemoteChannelTest, AWorkerThatMissesTheDeadlineIsSuspectOnTheInjectedClock) {
  RemoteChannel channel(options_);
  std::thread hello = AnswerHello(1);
  std::string dest(65536, '\0');
  auto f = Call(channel, Read(0, 0, 100), dest);
  hello.join();
  ASSERT_TRUE(ReadFrame(Connection(1)).ok());  // Received, never answered.
  // Real time passes and nothing happens until the injected clock passes the deadline.
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_FALSE(channel.suspect());
  clock_.Advance(std::chrono::milliseconds(1001));
  auto r = f.get();
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(r.status().outcome_unknown());  // The worker got it.
  EXPECT_TRUE(channel.suspect());
  // Suspect: calls fail fast, until the back-off passes on the same clock.
  auto fast = Call(channel, Read(0, 0, 100), dest).get();
  EXPECT_EQ(fast.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(fast.status().outcome_unknown());  // It never left,
  EXPECT_TRUE(fast.status().not_sent());          // and says so: safe to send again.
  EXPECT_FALSE(r.status().not_sent());
  clock_.Advance(options_.suspect_backoff + std::chrono::milliseconds(1));
  EXPECT_FALSE(channel.suspect());
}

// A write request the worker received before its connection broke may have been done; one that
// found no connection was not: the client fails over only the second (ClientImpl::AskOwners).
TEST_F(RemoteChannelTest, ARequestLostAfterItWasSentHasAnUnknownOutcomeOneNeverSentHasNot) {
  RemoteChannel channel(options_);
  std::thread hello = AnswerHello(1);
  protocol::RemovePathRequest remove;
  remove.path = "/lake/ckpt/step-1.pt";
  auto sent = std::make_shared<std::promise<StatusOr<protocol::WriteReply>>>();
  auto sent_future = sent->get_future();
  channel.CallWrite(remove,
                    [sent](StatusOr<protocol::WriteReply> r) { sent->set_value(std::move(r)); });
  hello.join();
  net::Stream* w = Connection(1);
  auto q = ReadFrame(w);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->first.type, MessageType::kRemovePath);
  w->Shutdown();  // The worker dies with the request in hand.
  ASSERT_EQ(sent_future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Status lost = sent_future.get().status();
  EXPECT_EQ(lost.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(lost.outcome_unknown()) << lost.ToString();

  // A worker that refuses connections never sees the request.
  RemoteChannelOptions refusing = options_;
  refusing.connect = [](const std::string&,
                        std::chrono::milliseconds) -> StatusOr<std::unique_ptr<net::Stream>> {
    return UnavailableError("connection refused");
  };
  RemoteChannel down(refusing);
  std::promise<StatusOr<protocol::WriteReply>> never;
  down.CallWrite(remove,
                 [&never](StatusOr<protocol::WriteReply> r) { never.set_value(std::move(r)); });
  Status refused = never.get_future().get().status();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(refused.outcome_unknown()) << refused.ToString();
  EXPECT_TRUE(refused.not_sent()) << refused.ToString();
  EXPECT_FALSE(lost.not_sent());
}

// A worker frozen in the middle of a reply (SIGSTOP between two writes of one page): the bytes
// sent so far are read, the rest never comes. The request's deadline still holds.
TEST_F(RemoteChannelTest, AWorkerThatStallsInTheMiddleOfAReplyMissesTheDeadline) {
  RemoteChannel channel(options_);
  std::thread hello = AnswerHello(1);
  std::string dest(65536, '\0');
  auto f = Call(channel, Read(0, 0, 65536), dest);
  hello.join();
  net::Stream* w = Connection(1);
  auto q = ReadFrame(w);
  ASSERT_TRUE(q.ok());
  std::string payload = DataReply(0, std::string(65536, 'x'));
  std::array<char, protocol::kFrameHeaderSize> raw;
  protocol::EncodeFrameHeader(
      {MessageType::kPageReply, 0, q->first.request_id, static_cast<uint32_t>(payload.size())},
      raw.data());
  std::string half = payload.substr(0, payload.size() - 30000);
  std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                            std::span<const char>(half)};
  ASSERT_TRUE(w->WriteAll(bufs).ok());
  // The reply has begun: nothing happens until the injected clock passes the deadline.
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_FALSE(channel.suspect());
  clock_.Advance(std::chrono::milliseconds(1001));
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the read waits for the rest of a reply that never comes";
  EXPECT_EQ(f.get().status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(channel.suspect());
}

TEST_F(RemoteChannelTest, MalformedRepliesFailTheCallAndCloseTheConnection) {
  struct Case {
    const char* name;
    std::function<Status(net::Stream*, uint64_t)> reply;
    StatusCode want;
  };
  std::vector<Case> cases = {
      {"truncated data",
       [](net::Stream* w, uint64_t id) {
         std::string full = DataReply(0, std::string(65536, 'x'));
         std::array<char, protocol::kFrameHeaderSize> raw;
         protocol::EncodeFrameHeader(
             {MessageType::kPageReply, 0, id, static_cast<uint32_t>(full.size())}, raw.data());
         std::string half = full.substr(0, full.size() / 2);
         std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                                   std::span<const char>(half)};
         CAIRN_RETURN_IF_ERROR(w->WriteAll(bufs));
         w->Shutdown();
         return Status::Ok();
       },
       StatusCode::kUnavailable},
      {"another range than asked",
       [](net::Stream* w, uint64_t id) {
         return SendFrame(w, MessageType::kPageReply, id, DataReply(0, std::string(100, 'x')));
       },
       StatusCode::kCorruption},
      {"garbage metadata",
       [](net::Stream* w, uint64_t id) {
         return SendFrame(w, MessageType::kPageReply, id, std::string("\x05\0\0\0garbage", 11));
       },
       StatusCode::kUnavailable},
      {"a control reply to a read",
       [](net::Stream* w, uint64_t id) {
         return SendFrame(w, MessageType::kControlReply, id, protocol::EncodeControlReply({}));
       },
       StatusCode::kOk},  // An answer without data: the caller sees data_length 0.
  };
  size_t n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RemoteChannel channel(options_);
    std::thread hello = AnswerHello(++n);
    std::string dest(65536, '\0');
    auto f = Call(channel, Read(0, 0, 100), dest);
    hello.join();
    net::Stream* w = Connection(n);
    auto q = ReadFrame(w);
    ASSERT_TRUE(q.ok());
    ASSERT_TRUE(c.reply(w, q->first.request_id).ok());
    ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    auto r = f.get();
    EXPECT_EQ(r.status().code(), c.want) << r.status().ToString();
    if (r.ok()) {
      EXPECT_EQ(r->data_length, 0u);
    }
  }
}

TEST_F(RemoteChannelTest, AWorkerWithAnotherPageSizeIsRefused) {
  RemoteChannel channel(options_);
  std::thread hello = AnswerHello(1, kPage / 2);
  std::string dest(65536, '\0');
  auto r = Call(channel, Read(0, 0, 100), dest).get();
  hello.join();
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(channel.suspect());
}

// Metadata requests share the connection, ids, deadlines and failure handling of page requests;
// a reply of the wrong kind fails the call.
TEST_F(RemoteChannelTest, MetadataRequestsGetTheirRepliesDeadlinesAndWrongKindsRefused) {
  auto call = [](RemoteChannel& channel, protocol::MetadataRequest request) {
    auto promise = std::make_shared<std::promise<StatusOr<protocol::MetadataReply>>>();
    auto future = promise->get_future();
    channel.CallMetadata(request, [promise](StatusOr<protocol::MetadataReply> r) {
      promise->set_value(std::move(r));
    });
    return future;
  };
  RemoteChannel channel(options_);
  std::thread hello = AnswerHello(1);
  auto listed = call(channel, protocol::ListDirRequest{0, "/lake/d", "t", 5});
  hello.join();
  net::Stream* w = Connection(1);
  auto q = ReadFrame(w);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->first.type, MessageType::kListDir);
  auto decoded = protocol::DecodeMetadataRequest(q->first.type, q->second);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(protocol::DeadlineOf(*decoded), 1000u);  // The channel's default.
  protocol::MetadataReply reply;
  reply.entries = {{"a.bin", false, 3, "v1", 7}};
  reply.next_token = "more";
  ASSERT_TRUE(SendFrame(w, MessageType::kMetadataReply, q->first.request_id,
                        protocol::EncodeMetadataReply(reply))
                  .ok());
  auto got = listed.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->entries, reply.entries);
  EXPECT_EQ(got->next_token, "more");

  // The worker's error arrives as the call's status.
  auto denied = call(channel, protocol::StatPathRequest{0, "/lake/x"});
  q = ReadFrame(w);
  ASSERT_TRUE(q.ok());
  protocol::MetadataReply no;
  no.status = StatusCode::kPermissionDenied;
  no.error_message = "no read grant";
  ASSERT_TRUE(SendFrame(w, MessageType::kMetadataReply, q->first.request_id,
                        protocol::EncodeMetadataReply(no))
                  .ok());
  EXPECT_EQ(denied.get().status().ToString(), "PermissionDenied: no read grant");

  // A control reply to a metadata request, and metadata for a page request, fail the call.
  auto wrong = call(channel, protocol::StatPathRequest{0, "/lake/x"});
  q = ReadFrame(w);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(SendFrame(w, MessageType::kControlReply, q->first.request_id,
                        protocol::EncodeControlReply({}))
                  .ok());
  EXPECT_EQ(wrong.get().status().code(), StatusCode::kCorruption);
  std::string dest(65536, '\0');
  auto page = Call(channel, Read(0, 0, 100), dest);
  q = ReadFrame(w);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(SendFrame(w, MessageType::kMetadataReply, q->first.request_id,
                        protocol::EncodeMetadataReply(reply))
                  .ok());
  EXPECT_EQ(page.get().status().code(), StatusCode::kCorruption);

  // Unanswered: DeadlineExceeded on the injected clock, like a page request.
  auto late = call(channel, protocol::ListDirRequest{0, "/lake", "", 10});
  ASSERT_TRUE(ReadFrame(w).ok());
  EXPECT_EQ(late.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  clock_.Advance(std::chrono::milliseconds(1001));
  EXPECT_EQ(late.get().status().code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace cairn::transport
