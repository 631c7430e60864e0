#include "transport/remote_channel.h"

#include <spdlog/spdlog.h>

#include <array>
#include <fstream>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "common/checksum.h"
#include "common/clock.h"
#include "net/stream.h"

namespace cairn::transport {

using protocol::FrameHeader;
using protocol::MessageType;

namespace {}  // namespace

void RemoteChannel::Pending::Fail(Status why) {
  if (metadata_done) {
    metadata_done(std::move(why));
  } else if (write_done) {
    write_done(std::move(why));
  } else {
    done(std::move(why));
  }
}

// One TCP connection with its reader thread and the requests waiting on it.
class RemoteChannel::Conn : public std::enable_shared_from_this<Conn> {
 public:
  static StatusOr<std::shared_ptr<Conn>> Open(const RemoteChannelOptions& options,
                                              protocol::HelloReply* hello) {
    auto stream = options.connect ? options.connect(options.address, options.connect_timeout)
                                  : net::ConnectTcp(options.address, options.connect_timeout);
    if (!stream.ok()) return stream.status();
    auto conn =
        std::shared_ptr<Conn>(new Conn(std::move(stream).value(), options.clock->NowMicros()));
    conn->stream_->SetReadTimeout(options.request_timeout);
    CAIRN_ASSIGN_OR_RETURN(*hello, conn->Handshake(options.page_size, options.token));
    if (hello->status != StatusCode::kOk) return Status(hello->status, hello->error_message);
    conn->stream_->SetReadTimeout(std::chrono::milliseconds(0));  // The sweeper bounds waits.
    conn->reader_ = std::thread([c = conn] { c->ReadLoop(); });
    return conn;
  }

  ~Conn() {
    stream_->Shutdown();
    if (reader_.joinable()) {
      if (reader_.get_id() == std::this_thread::get_id())
        reader_.detach();
      else
        reader_.join();
    }
  }

  bool dead() const { return dead_.load(); }

  // Waits for the reader thread to end (after Close). The channel's destructor calls it so that
  // no reader outlives the channel: a reader that dropped the last reference would destroy the
  // stream on its own, detached, thread, possibly while the process exits (and OpenSSL's exit
  // handler frees what that thread is still freeing: a double free seen once in a test).
  void JoinReader() {
    if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
  }

  // Sends the request; `done` runs once with the reply or an error. Returns false (and does
  // not call `done`) if the connection was already closed: the caller may use another one.
  [[nodiscard]] bool Send(uint64_t id, MessageType type, const std::string& payload,
                          std::span<const char> extra, Pending& pending, int64_t now_us) {
    {
      MutexLock l(&mu_);
      // Close() sets dead_ before it takes mu_ to fail pending requests, so a request either
      // sees dead_ here or is failed by Close(): none is left waiting forever.
      if (dead_.load()) return false;
      pending_.emplace(id, std::move(pending));
      last_used_us_ = now_us;
    }
    std::array<char, protocol::kFrameHeaderSize> raw;
    protocol::EncodeFrameHeader({type, 0, id, static_cast<uint32_t>(payload.size() + extra.size())},
                                raw.data());
    std::array<std::span<const char>, 3> all{std::span<const char>(raw),
                                             std::span<const char>(payload), extra};
    std::span<const std::span<const char>> bufs(all.data(), extra.empty() ? 2 : 3);
    Status s;
    {
      MutexLock l(&write_mu_);
      s = stream_->WriteAll(bufs);
    }
    if (!s.ok()) Close(s);
    return true;
  }

  // Closes the connection if nothing was sent on it since `cutoff_us` and nothing is in
  // flight. Atomic with Send: a request either lands before (and keeps it open) or finds it
  // closed (and opens another).
  bool CloseIfIdle(int64_t cutoff_us) {
    {
      MutexLock l(&mu_);
      if (dead_.load() || !pending_.empty() || last_used_us_ >= cutoff_us) return false;
      dead_ = true;
    }
    stream_->Shutdown();
    spdlog::debug("closing idle connection to {}", stream_->PeerName());
    return true;
  }

  // Removes the requests past their deadline and returns their callbacks (the caller runs them
  // after marking the worker suspect, so a caller that retries at once already sees it).
  std::vector<Pending> TakeLate(int64_t now_us) {
    std::vector<Pending> late;
    {
      MutexLock l(&mu_);
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.deadline_us <= now_us) {
          late.push_back(std::move(it->second));
          it = pending_.erase(it);
        } else {
          ++it;
        }
      }
    }
    return late;
  }

  // Whether the reply body being read now is past its request's deadline. If so, the next
  // Close() fails that request with DeadlineExceeded (the reader does, when its read ends).
  bool BodyLate(int64_t now_us) {
    int64_t deadline = body_deadline_us_.load();
    if (deadline == 0 || deadline > now_us) return false;
    body_late_.store(true);
    return true;
  }

  void Close(const Status& why) {
    if (dead_.exchange(true)) return;
    stream_->Shutdown();
    std::unordered_map<uint64_t, Pending> failed;
    {
      MutexLock l(&mu_);
      failed.swap(pending_);
    }
    spdlog::debug("connection to {} closed: {}", stream_->PeerName(), why.ToString());
    // Each of them may have reached the worker (a request is pending once it is being sent).
    for (auto& [id, p] : failed) p.Fail(UnavailableError(why.message()).WithOutcomeUnknown());
  }

 private:
  Conn(std::unique_ptr<net::Stream> stream, int64_t now_us)
      : stream_(std::move(stream)), last_used_us_(now_us) {}

  StatusOr<protocol::HelloReply> Handshake(uint32_t page_size, const std::string& token) {
    std::array<char, protocol::kFrameHeaderSize> raw;
    protocol::HelloRequest request;
    if (!token.empty()) {
      if (!stream_->Encrypted() && !stream_->PeerOnThisHost()) {
        return FailedPreconditionError("not sending the token to worker " + stream_->PeerName() +
                                       " over plaintext: connect with TLS (--tls-ca, "
                                       "--tls-cert, --tls-key)");
      }
      request.token = token;
    }
    std::string asked = protocol::EncodeHelloRequest(request);
    protocol::EncodeFrameHeader({MessageType::kHello, 0, 0, static_cast<uint32_t>(asked.size())},
                                raw.data());
    std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                              std::span<const char>(asked)};
    CAIRN_RETURN_IF_ERROR(stream_->WriteAll(bufs));
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(raw));
    StatusOr<FrameHeader> decoded = protocol::DecodeFrameHeader(raw);
    if (!decoded.ok()) {
      return Status(decoded.status().code(),
                    "worker " + stream_->PeerName() + ": " + decoded.status().message());
    }
    FrameHeader h = *decoded;
    if ((h.type != MessageType::kHelloReply && h.type != MessageType::kVersionMismatch) ||
        h.payload_length > 65536) {
      return UnavailableError("unexpected handshake reply from " + stream_->PeerName());
    }
    std::string payload(h.payload_length, '\0');
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(payload));
    if (h.type == MessageType::kVersionMismatch) {
      auto mismatch = protocol::DecodeVersionMismatch(payload);
      return FailedPreconditionError(mismatch.ok() ? mismatch->message
                                                   : "worker " + stream_->PeerName() +
                                                         " refused this protocol version");
    }
    CAIRN_ASSIGN_OR_RETURN(protocol::HelloReply hello, protocol::DecodeHelloReply(payload));
    if (hello.status != StatusCode::kOk) return hello;  // Open reports the worker's refusal.
    if (hello.page_size != page_size) {
      return FailedPreconditionError("worker " + stream_->PeerName() + " uses page size " +
                                     std::to_string(hello.page_size) + ", this client " +
                                     std::to_string(page_size));
    }
    return hello;
  }

  void ReadLoop() {
    Status s = ReadReplies();
    Close(s);
  }

  Status ReadReplies() {
    std::array<char, protocol::kFrameHeaderSize> raw;
    std::string meta;
    std::string scratch;
    while (true) {
      CAIRN_RETURN_IF_ERROR(stream_->ReadFull(raw));
      CAIRN_ASSIGN_OR_RETURN(FrameHeader h, protocol::DecodeFrameHeader(raw));
      switch (h.type) {
        case MessageType::kPong:
          CAIRN_RETURN_IF_ERROR(Skip(h.payload_length, &scratch));
          break;
        case MessageType::kControlReply:
          CAIRN_RETURN_IF_ERROR(ReadControlReply(h, &scratch));
          break;
        case MessageType::kPageReply:
          CAIRN_RETURN_IF_ERROR(ReadPageReply(h, &meta, &scratch));
          break;
        case MessageType::kMetadataReply:
          CAIRN_RETURN_IF_ERROR(ReadMetadataReply(h, &scratch));
          break;
        case MessageType::kWriteReply:
          CAIRN_RETURN_IF_ERROR(ReadWriteReply(h, &scratch));
          break;
        case MessageType::kVersionMismatch: {
          if (h.payload_length > 65536) return CorruptionError("oversized version mismatch");
          scratch.resize(h.payload_length);
          CAIRN_RETURN_IF_ERROR(stream_->ReadFull(scratch));
          auto mismatch = protocol::DecodeVersionMismatch(scratch);
          return FailedPreconditionError(mismatch.ok() ? mismatch->message
                                                       : "worker refused this protocol version");
        }
        default:
          return CorruptionError("unexpected message type from worker");
      }
    }
  }

  Status Skip(uint32_t length, std::string* scratch) {
    scratch->resize(length);
    return stream_->ReadFull(*scratch);
  }

  Status ReadControlReply(const FrameHeader& h, std::string* scratch) {
    if (h.payload_length > protocol::kMaxPageReplyMeta) {
      return CorruptionError("oversized control reply");
    }
    scratch->resize(h.payload_length);
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(*scratch));
    CAIRN_ASSIGN_OR_RETURN(protocol::ControlReply reply, protocol::DecodeControlReply(*scratch));
    std::optional<Pending> pending = Claim(h.request_id);
    if (!pending) return Status::Ok();  // Timed out already.
    if (pending->kind() != Pending::Kind::kPage) {
      pending->Fail(
          CorruptionError("worker answered a metadata or write request with a control "
                          "reply"));
      return Status::Ok();
    }
    if (reply.status != StatusCode::kOk) {
      pending->done(Status(reply.status, reply.error_message));
      return Status::Ok();
    }
    protocol::PageReply out;
    out.source = reply.source;
    pending->done(std::move(out));
    return Status::Ok();
  }

  Status ReadMetadataReply(const FrameHeader& h, std::string* scratch) {
    scratch->resize(h.payload_length);  // At most kMaxPayload (DecodeFrameHeader).
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(*scratch));
    CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply, protocol::DecodeMetadataReply(*scratch));
    std::optional<Pending> pending = Claim(h.request_id);
    if (!pending) return Status::Ok();  // Timed out already.
    if (pending->kind() != Pending::Kind::kMetadata) {
      pending->Fail(CorruptionError("worker answered a page or write request with metadata"));
      return Status::Ok();
    }
    if (reply.status != StatusCode::kOk) {
      pending->metadata_done(Status(reply.status, reply.error_message));
    } else {
      pending->metadata_done(std::move(reply));
    }
    return Status::Ok();
  }

  Status ReadWriteReply(const FrameHeader& h, std::string* scratch) {
    if (h.payload_length > protocol::kMaxWriteReplyPayload) {
      return CorruptionError("oversized write reply");
    }
    scratch->resize(h.payload_length);
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(*scratch));
    CAIRN_ASSIGN_OR_RETURN(protocol::WriteReply reply, protocol::DecodeWriteReply(*scratch));
    std::optional<Pending> pending = Claim(h.request_id);
    if (!pending) return Status::Ok();  // Timed out already.
    if (pending->kind() != Pending::Kind::kWrite) {
      pending->Fail(
          CorruptionError("worker answered a page or metadata request with a write "
                          "reply"));
      return Status::Ok();
    }
    if (reply.status != StatusCode::kOk) {
      pending->write_done(protocol::WriteReplyError(reply));
    } else {
      pending->write_done(std::move(reply));
    }
    return Status::Ok();
  }

  Status ReadPageReply(const FrameHeader& h, std::string* meta, std::string* scratch) {
    if (h.payload_length < protocol::kPageReplyPrefixSize) {
      return CorruptionError("page reply too short");
    }
    std::array<char, protocol::kPageReplyPrefixSize> prefix;
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(prefix));
    CAIRN_ASSIGN_OR_RETURN(uint32_t meta_length,
                           protocol::DecodePageReplyMetaLength(prefix, h.payload_length));
    meta->resize(meta_length);
    CAIRN_RETURN_IF_ERROR(stream_->ReadFull(*meta));
    CAIRN_ASSIGN_OR_RETURN(protocol::PageReplyMeta reply, protocol::DecodePageReplyMeta(*meta));
    uint64_t data_length = h.payload_length - protocol::kPageReplyPrefixSize - meta_length;
    if (reply.status == StatusCode::kOk ? data_length != reply.data_length : data_length != 0) {
      return CorruptionError("reply length does not match its header");
    }
    std::optional<Pending> pending = Claim(h.request_id);
    if (!pending) return Skip(static_cast<uint32_t>(data_length), scratch);  // Timed out.
    if (pending->kind() != Pending::Kind::kPage) {
      pending->Fail(CorruptionError("worker answered a metadata or write request with page data"));
      return Skip(static_cast<uint32_t>(data_length), scratch);
    }
    if (reply.status != StatusCode::kOk) {
      pending->done(Status(reply.status, reply.error_message));
      return Status::Ok();
    }
    // No data is a complete answer too: a lookup or peer read of a page not cached there.
    if (data_length != 0 && pending->dest.size() != data_length) {
      Status r = Skip(static_cast<uint32_t>(data_length), scratch);
      pending->done(CorruptionError("worker returned an unexpected range"));
      return r;
    }
    // The request left pending_ with its Claim, so the sweeper cannot see it any more: keep its
    // deadline in force while the body arrives. A worker frozen in the middle of a reply (SIGSTOP
    // between two writes of a page) would otherwise hold this read until it woke up.
    body_deadline_us_.store(pending->deadline_us);
    Status r = stream_->ReadFull(pending->dest.first(data_length));
    body_deadline_us_.store(0);
    if (!r.ok()) {
      pending->done((body_late_.load() ? DeadlineExceededError("worker did not finish its reply "
                                                               "in time")
                                       : UnavailableError(r.message()))
                        .WithOutcomeUnknown());
      return r;
    }
    protocol::PageReply out;
    out.source = reply.source;
    out.data_offset = reply.data_offset;
    out.data_length = reply.data_length;
    out.checksums = std::move(reply.checksums);
    pending->done(std::move(out));
    return Status::Ok();
  }

  std::optional<Pending> Claim(uint64_t id) {
    MutexLock l(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return std::nullopt;
    Pending p = std::move(it->second);
    pending_.erase(it);
    return p;
  }

  std::unique_ptr<net::Stream> stream_;
  std::thread reader_;
  std::atomic<bool> dead_{false};
  // Deadline of the request whose reply body the reader is reading (0: none), and whether the
  // sweeper found it passed.
  std::atomic<int64_t> body_deadline_us_{0};
  std::atomic<bool> body_late_{false};
  Mutex write_mu_;
  Mutex mu_;
  std::unordered_map<uint64_t, Pending> pending_ GUARDED_BY(mu_);
  int64_t last_used_us_ GUARDED_BY(mu_);
};

RemoteChannel::RemoteChannel(RemoteChannelOptions options) : options_(std::move(options)) {
  options_.connections = std::max(1, options_.connections);
  sweeper_ = std::thread([this] { SweepLoop(); });
}

RemoteChannel::~RemoteChannel() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  sweeper_.join();
  std::vector<std::shared_ptr<Conn>> conns;
  {
    MutexLock l(&mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    if (c) c->Close(UnavailableError("channel closed"));
  }
  for (auto& c : conns) {
    if (c) c->JoinReader();
  }
}

std::shared_ptr<const std::vector<std::string>> RemoteChannel::CheckShortCircuit(
    const protocol::HelloReply& hello) {
  if (hello.instance_token.empty() || hello.cache_dirs.empty()) return nullptr;
  for (const std::string& dir : hello.cache_dirs) {
    std::ifstream in(dir + "/INSTANCE");
    std::string token;
    if (!in || !std::getline(in, token) || token != hello.instance_token) return nullptr;
  }
  // Once per channel, not per connection.
  if (!short_circuit_logged_.exchange(true)) {
    spdlog::debug("worker {} shares this machine: reading its cached pages directly",
                  options_.address);
  }
  return std::make_shared<const std::vector<std::string>>(hello.cache_dirs);
}

std::shared_ptr<const std::vector<std::string>> RemoteChannel::ShortCircuitDirs() {
  if (!options_.short_circuit || suspect()) return nullptr;  // Failover decides for suspects.
  // The first read of a fresh channel connects now: the handshake tells whether the worker
  // shares this machine, so even that read can skip the network.
  Status ignored;  // Logged by GetConnection; the read that follows reports it.
  if (!handshaken_.load(std::memory_order_acquire) && !GetConnection(&ignored)) return nullptr;
  MutexLock l(&mu_);
  return short_circuit_dirs_;
}

bool RemoteChannel::suspect() const {
  return options_.clock->NowMicros() < suspect_until_us_.load();
}

void RemoteChannel::MarkSuspect() {
  suspect_until_us_.store(options_.clock->NowMicros() + options_.suspect_backoff.count() * 1000);
}

Status RemoteChannel::Refusal() {
  if (!suspect()) return Status::Ok();
  MutexLock l(&mu_);
  return refusal_;
}

std::shared_ptr<RemoteChannel::Conn> RemoteChannel::GetConnection(Status* why) {
  size_t slot = round_robin_.fetch_add(1) % options_.connections;
  {
    MutexLock l(&mu_);
    if (conns_.size() < static_cast<size_t>(options_.connections))
      conns_.resize(options_.connections);
    if (conns_[slot] && !conns_[slot]->dead()) return conns_[slot];
  }
  protocol::HelloReply hello;
  auto opened = Conn::Open(options_, &hello);
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kFailedPrecondition) {
      // An incompatible protocol version or page size: no retry will fix it, say so loudly.
      spdlog::error("worker {} cannot be used: {}", options_.address, opened.status().message());
    } else {
      spdlog::warn("cannot reach worker {}: {}", options_.address, opened.status().ToString());
    }
    *why = opened.status();
    {
      // Only the worker's answer to this client's credential in HelloReply (a refused TLS
      // handshake is a transport failure: the caller fails over as for any unreachable worker).
      MutexLock l(&mu_);
      refusal_ = hello.status != StatusCode::kOk ? opened.status() : Status::Ok();
    }
    MarkSuspect();
    return nullptr;
  }
  auto dirs = options_.short_circuit ? CheckShortCircuit(hello) : nullptr;
  std::shared_ptr<Conn> winner;
  {
    MutexLock l(&mu_);
    short_circuit_dirs_ = std::move(dirs);
    handshaken_.store(true, std::memory_order_release);
    // Another thread may have connected this slot meanwhile: keep one connection, close ours.
    if (conns_[slot] && !conns_[slot]->dead()) {
      winner = conns_[slot];
    } else {
      conns_[slot] = *opened;
      return *opened;
    }
  }
  (*opened)->Close(UnavailableError("duplicate connection"));
  return winner;
}

void RemoteChannel::Call(const protocol::Request& request, std::span<char> dest, Callback done) {
  protocol::Request sent = request;
  // A caller-set deadline wins (a preload waits for a source read and a disk write); reads use
  // the channel's.
  uint32_t& deadline_ms = protocol::BaseOf(sent).deadline_ms;
  if (deadline_ms == 0) deadline_ms = static_cast<uint32_t>(options_.request_timeout.count());
  Pending pending;
  pending.dest = dest;
  pending.done = std::move(done);
  Send(protocol::TypeOf(sent), protocol::EncodeRequest(sent), deadline_ms, std::move(pending));
}

void RemoteChannel::CallMetadata(const protocol::MetadataRequest& request, MetadataCallback done) {
  protocol::MetadataRequest sent = request;
  uint32_t& deadline_ms = protocol::DeadlineOf(sent);
  if (deadline_ms == 0) deadline_ms = static_cast<uint32_t>(options_.request_timeout.count());
  Pending pending;
  pending.metadata_done = std::move(done);
  Send(protocol::TypeOf(sent), protocol::EncodeMetadataRequest(sent), deadline_ms,
       std::move(pending));
}

void RemoteChannel::CallWrite(const protocol::WriteRequest& request, WriteCallback done) {
  uint32_t deadline_ms = protocol::DeadlineOf(request);
  if (deadline_ms == 0) deadline_ms = static_cast<uint32_t>(options_.request_timeout.count());
  Pending pending;
  pending.write_done = std::move(done);
  std::span<const char> data;
  std::string payload;
  if (const auto* write = std::get_if<protocol::WritePageRequest>(&request)) {
    data = write->data;
    payload = protocol::EncodeWriteRequest(request);
  } else {
    // The deadline travels with the request so the worker drops what the client gave up on.
    protocol::WriteRequest sent = request;
    std::visit(
        [deadline_ms](auto& q) {
          if constexpr (requires { q.deadline_ms; }) q.deadline_ms = deadline_ms;
        },
        sent);
    payload = protocol::EncodeWriteRequest(sent);
  }
  Send(protocol::TypeOf(request), payload, deadline_ms, std::move(pending), data);
}

void RemoteChannel::Send(MessageType type, const std::string& payload, uint32_t deadline_ms,
                         Pending pending, std::span<const char> extra) {
  // Unavailable before a request is on a connection is marked not_sent(): a caller may send it
  // again, to this worker too, without any doubt about what happened. (A refused credential is
  // not: sending it again would be refused again.)
  auto not_sent = [](Status s) {
    return s.code() == StatusCode::kUnavailable ? s.WithNotSent() : s;
  };
  if (suspect()) {
    Status refused = Refusal();
    pending.Fail(not_sent(!refused.ok() ? refused
                                        : UnavailableError("worker " + options_.address +
                                                           " is suspect (recently unreachable)")));
    return;
  }
  // A connection closed a moment ago (idle, or by the worker) is replaced once.
  Status why;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::shared_ptr<Conn> conn = GetConnection(&why);
    if (!conn) break;
    int64_t now = options_.clock->NowMicros();
    pending.deadline_us = now + int64_t{deadline_ms} * 1000;
    if (conn->Send(next_id_.fetch_add(1), type, payload, extra, pending, now)) return;
  }
  // A refused credential is the caller's to report (every worker would refuse it); anything
  // else is Unavailable (a refused TLS handshake too): the caller fails over.
  if (Status refused = Refusal(); !refused.ok()) {
    pending.Fail(not_sent(refused));
    return;
  }
  pending.Fail(not_sent(UnavailableError("worker " + options_.address + " is unreachable" +
                                         (why.ok() ? "" : ": " + why.message()))));
}

void RemoteChannel::SweepLoop() {
  auto period = std::max(std::chrono::milliseconds(5), options_.request_timeout / 20);
  MutexLock l(&mu_);
  while (!stopping_) {
    stop_cv_.WaitFor(&mu_, period, [this]() REQUIRES(mu_) { return stopping_; });
    if (stopping_) break;
    std::vector<std::shared_ptr<Conn>> conns = conns_;
    mu_.Unlock();
    int64_t now = options_.clock->NowMicros();
    for (auto& c : conns) {
      if (c && options_.idle_close.count() > 0) {
        c->CloseIfIdle(now - options_.idle_close.count() * 1000);
      }
      if (c == nullptr) continue;
      std::vector<Pending> late = c->TakeLate(now);
      const bool body_late = c->BodyLate(now);
      if (late.empty() && !body_late) continue;
      // A worker that lets a request pass its deadline is stalled (SIGSTOP, overload,
      // partition): stop using it for a while, and drop the connection so a reader blocked in
      // the middle of a reply is woken up.
      spdlog::warn("worker {} missed a deadline; marking it suspect", options_.address);
      MarkSuspect();
      c->Close(DeadlineExceededError("deadline missed"));
      for (auto& p : late) {
        p.Fail(DeadlineExceededError("worker did not answer in time").WithOutcomeUnknown());
      }
    }
    mu_.Lock();
  }
}

}  // namespace cairn::transport
