#include "worker/server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <csignal>
#include <deque>
#include <optional>

#include "protocol/wire.h"

namespace cairn::worker {

using protocol::FrameHeader;
using protocol::MessageType;

namespace {
constexpr uint32_t kMaxRequestPayload = 64 * 1024;
// A WritePage: its data, one checksum per 4 KiB chunk (8 KiB for 4 MiB), and a few fields.
constexpr uint32_t kMaxWritePayload = protocol::kMaxWriteData + 64 * 1024;
}  // namespace

// Server-wide series; they live in the registry (the worker's, or one the server owns).
struct WorkerServer::Counters {
  explicit Counters(metrics::Registry* r)
      : connections(r->AddGauge("cairn_worker_connections", "Client connections open now")),
        accepted(r->AddCounter("cairn_worker_connections_accepted_total",
                               "Client connections accepted")),
        refused(r->AddCounter("cairn_worker_connections_refused_total",
                              "Client connections refused or closed to stay under the "
                              "connection cap")),
        timed_out(r->AddCounter("cairn_worker_connections_timed_out_total",
                                "Client connections closed for a send, handshake or idle "
                                "timeout")),
        tls_refused(r->AddCounter("cairn_worker_connections_tls_refused_total",
                                  "Client connections closed for a failed TLS handshake "
                                  "(refused certificate) or for speaking plaintext to a TLS "
                                  "worker")),
        metadata(r->AddCounter("cairn_worker_metadata_requests_total",
                               "Stat and directory listing requests from clients (answered "
                               "from the sources)")) {}
  std::unique_ptr<metrics::Registry> owned;
  metrics::Gauge* connections;
  metrics::Counter* accepted;
  metrics::Counter* refused;
  metrics::Counter* timed_out;
  metrics::Counter* tls_refused;
  metrics::Counter* metadata;
};

// One answer to one request, built by whichever thread served it and written by the reader
// (inline hits, errors) or the connection's writer (everything from the pools).
struct Reply {
  uint64_t id = 0;
  bool data = false;           // A kPageReply (else a kControlReply, or:)
  bool metadata = false;       // A kMetadataReply (answer in `listing`).
  bool write = false;          // A kWriteReply (answer in `written`).
  Status error;                // Not OK: an error reply.
  PageService::Served served;  // When OK.
  protocol::PageRef page;      // To drop a page file found truncated.
  protocol::MetadataReply listing;
  protocol::WriteReply written;
};

class WorkerServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(uint64_t id, std::unique_ptr<net::Stream> stream, WorkerServer* server)
      : id_(id),
        stream_(std::move(stream)),
        server_(server),
        service_(server->service_),
        options_(server->options_) {}

  Clock& clock() const { return options_.clock != nullptr ? *options_.clock : *Clock::Real(); }

  void Start() {
    stream_->SetReadTimeout(options_.handshake_timeout);
    stream_->SetWriteTimeout(options_.send_timeout);
    reader_ = std::thread([self = shared_from_this()] { self->ReadLoop(); });
    writer_ = std::thread([self = shared_from_this()] { self->WriteLoop(); });
  }
  void Shutdown() EXCLUDES(mu_) {
    stream_->Shutdown();
    {
      MutexLock l(&mu_);
      closed_ = true;
    }
    cv_.NotifyAll();
  }
  void Join() {
    if (reader_.joinable()) reader_.join();
    if (writer_.joinable()) writer_.join();
  }
  bool finished() const { return reader_done_.load() && writer_done_.load(); }
  uint64_t parked_bytes() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return parked_bytes_;
  }
  bool closed() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return closed_;
  }
  // True once the client sent a first complete request frame.
  bool greeted() const { return greeted_.load(); }

 private:
  void ReadLoop() {
    std::string peer = stream_->PeerName();
    Status s = Serve();
    if (s.code() == StatusCode::kDeadlineExceeded) {
      server_->counters_->timed_out->Increment();
      spdlog::info("closing connection from {}: {}", peer, s.ToString());
    } else if (s.code() != StatusCode::kUnavailable) {
      spdlog::warn("closing connection from {}: {}", peer, s.ToString());
    } else {
      spdlog::debug("connection from {} ended: {}", peer, s.ToString());
    }
    Shutdown();
    reader_done_ = true;
  }

  Status Serve() {
    std::array<char, protocol::kFrameHeaderSize> raw;
    std::string payload;
    while (true) {
      CAIRN_RETURN_IF_ERROR(WaitForRoom());
      Status header_read = stream_->ReadFull(raw);
      if (header_read.code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceededError(greeted() ? "idle for too long" : "no request in time");
      }
      if (!greeted() && options_.tls != nullptr && !header_read.ok()) {
        return RefuseTls(std::move(header_read));
      }
      CAIRN_RETURN_IF_ERROR(header_read);
      const int64_t received = clock().NowMicros();
      StatusOr<FrameHeader> decoded = protocol::DecodeFrameHeader(raw);
      if (!decoded.ok() && !greeted() && options_.tls == nullptr &&
          static_cast<unsigned char>(raw[0]) == 0x16 && raw[1] == 0x03) {
        return FailedPreconditionError(
            "a TLS client connected to this plaintext worker (start the worker with --tls-ca, "
            "--tls-cert and --tls-key, or connect without TLS)");
      }
      if (decoded.status().code() == StatusCode::kFailedPrecondition) {
        return RefuseVersion(decoded.status());
      }
      CAIRN_ASSIGN_OR_RETURN(FrameHeader header, std::move(decoded));
      const uint32_t max_payload =
          header.type == MessageType::kWritePage ? kMaxWritePayload : kMaxRequestPayload;
      if (header.payload_length > max_payload) {
        return CorruptionError("request payload too large: " +
                               std::to_string(header.payload_length));
      }
      payload.resize(header.payload_length);
      Status r = stream_->ReadFull(payload);
      if (!r.ok()) return CorruptionError("truncated frame: " + r.message());
      if (!greeted_.exchange(true)) stream_->SetReadTimeout(options_.idle_timeout);
      switch (header.type) {
        case MessageType::kHello: {
          CAIRN_ASSIGN_OR_RETURN(protocol::HelloRequest asked,
                                 protocol::DecodeHelloRequest(payload));
          if (asked.max_version < protocol::kVersion || asked.min_version > protocol::kVersion) {
            return RefuseVersion(FailedPreconditionError(
                "protocol version mismatch: the client speaks Cairn protocol v" +
                std::to_string(asked.min_version) + "-v" + std::to_string(asked.max_version) +
                ", this worker v" + std::to_string(protocol::kVersion)));
          }
          protocol::HelloReply hello;
          if (!asked.token.empty()) {
            StatusOr<auth::Identity> by_token =
                options_.authorizer != nullptr
                    ? options_.authorizer->IdentityOfToken(identity(), asked.token)
                    : StatusOr<auth::Identity>(PermissionDeniedError(
                          "this worker accepts no tokens (no authorization configured)"));
            if (!by_token.ok()) {
              // Told to the client, then closed: a client with a bad credential gets nothing.
              hello.status = by_token.status().code();
              hello.error_message = "worker " + service_->worker_id() +
                                    " refused the token: " + by_token.status().message();
              Send(MessageType::kHelloReply, header.request_id, protocol::EncodeHelloReply(hello))
                  .IgnoreError();
              return by_token.status();
            }
            identity_ = std::move(by_token).value();
          }
          hello.principal = identity().principal;
          hello.page_size = service_->page_size();
          hello.worker_id = service_->worker_id();
          // Local paths and the token that proves them are for clients on this machine only
          // (short-circuit reads); others learn nothing about the worker's disks. Under an
          // enabled policy not even those: short-circuit reads would bypass the checks.
          const bool policy_enabled =
              options_.authorizer != nullptr && options_.authorizer->policy()->enabled();
          if (stream_->PeerOnThisHost() && !policy_enabled) {
            hello.instance_token = service_->options().instance_token;
            hello.cache_dirs = service_->options().cache_dirs;
          }
          CAIRN_RETURN_IF_ERROR(
              Send(MessageType::kHelloReply, header.request_id, protocol::EncodeHelloReply(hello)));
          break;
        }
        case MessageType::kPing:
          CAIRN_RETURN_IF_ERROR(Send(MessageType::kPong, header.request_id, ""));
          break;
        default:
          if (protocol::IsMetadataRequest(header.type)) {
            CAIRN_RETURN_IF_ERROR(DispatchMetadata(header, payload, received));
          } else if (protocol::IsWriteRequest(header.type)) {
            CAIRN_RETURN_IF_ERROR(DispatchWrite(header, payload, received));
          } else {
            CAIRN_RETURN_IF_ERROR(Dispatch(header, payload, received));
          }
          break;
      }
    }
  }

  // Who this connection is (reader thread only): its certificate's principal, known once the
  // lazy TLS handshake ran in the first read, or the token's once Hello presented one.
  const auth::Identity& identity() {
    if (!identity_known_) {
      if (identity_.source == auth::Identity::Source::kAnonymous) {
        identity_ = RequestAuthorizer::IdentityOf(*stream_);
      }
      identity_known_ = true;
    }
    return identity_;
  }

  // Blocks the reader while the connection has its maximum of requests outstanding.
  Status WaitForRoom() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    cv_.Wait(&mu_, [this]() REQUIRES(mu_) {
      return closed_ || outstanding_ < options_.max_outstanding_per_connection;
    });
    if (closed_) return UnavailableError("connection closed");
    return Status::Ok();
  }

  // A failed TLS handshake (logged with its reason by ReadLoop); a plaintext client is told
  // in the clear, in a frame it can read, how to connect.
  Status RefuseTls(Status why) {
    const StatusCode code = why.code();
    if (code == StatusCode::kFailedPrecondition || code == StatusCode::kPermissionDenied) {
      server_->counters_->tls_refused->Increment();
    }
    if (code != StatusCode::kFailedPrecondition) return why;
    return RefuseVersion(FailedPreconditionError(
        "this worker requires TLS: connect with the cluster's CA and a client certificate "
        "(--tls-ca, --tls-cert, --tls-key; docs/security.md)"));
  }

  // Tells a peer that speaks another protocol version which ones this worker speaks (in a
  // frame any version can read), then closes.
  Status RefuseVersion(Status why) {
    protocol::VersionMismatch mismatch;
    mismatch.message = "worker " + service_->worker_id() + ": " + why.message();
    Send(MessageType::kVersionMismatch, 0, protocol::EncodeVersionMismatch(mismatch)).IgnoreError();
    return why;
  }

  Status Dispatch(const FrameHeader& header, const std::string& payload, int64_t received) {
    const uint64_t id = header.request_id;
    auto request = protocol::DecodeRequest(header.type, payload);
    if (!request.ok()) {
      if (request.status().code() == StatusCode::kCorruption) return request.status();
      Reply reply;
      reply.id = id;
      reply.data = protocol::WantsData(header.type);
      reply.error = request.status();
      return Write(reply);
    }
    if (options_.authorizer != nullptr) {
      Status allowed = options_.authorizer->Check(identity(), *request, &audit_);
      if (!allowed.ok()) {
        Reply reply;
        reply.id = id;
        reply.data = protocol::WantsData(header.type);
        reply.error = std::move(allowed);
        return Write(reply);
      }
    }
    // A hit, or a request that never reads the source, is served inline; a known mount's miss
    // goes to the miss threads, an unknown mount (which may wait for the table) to its own pool.
    StatusOr<PageService::Served> now = InternalError("not served");
    PageService::Route route = service_->TryServeNow(*request, &now);
    if (route == PageService::Route::kServed) {
      return Write(ReplyWith(id, *request, std::move(now)));
    }
    FairPool* pool = route == PageService::Route::kMiss ? server_->miss_pool_.get()
                                                        : server_->mount_wait_pool_.get();
    {
      MutexLock l(&mu_);
      ++outstanding_;
    }
    pool->Submit(id_, [self = shared_from_this(), id, req = std::move(request).value(), received] {
      // A closed connection's queued requests are dropped, not served (and a stopping server
      // does not wait for their source reads).
      self->Enqueue(self->closed() ? Reply{} : self->Handle(id, req, received));
    });
    return Status::Ok();
  }

  // StatPath and ListDir: authorized here, answered on a pool thread (they read the source).
  // ListPending: answered inline.
  Status DispatchMetadata(const FrameHeader& header, const std::string& payload, int64_t received) {
    const uint64_t id = header.request_id;
    server_->counters_->metadata->Increment();
    auto request = protocol::DecodeMetadataRequest(header.type, payload);
    if (!request.ok()) {
      if (request.status().code() == StatusCode::kCorruption) return request.status();
      return Write(MetadataReplyWith(id, request.status()));
    }
    auth::Visibility visible{true, {}};
    if (options_.authorizer != nullptr) {
      auto checked = options_.authorizer->CheckMetadata(identity(), *request, &audit_);
      if (!checked.ok()) return Write(MetadataReplyWith(id, checked.status()));
      visible = std::move(checked).value();
    }
    // ListPending is answered from memory, inline: a worker whose miss threads all wait on
    // their peers' ListPending answers must still answer its peers'.
    if (std::holds_alternative<protocol::ListPendingRequest>(*request)) {
      return Write(MetadataReplyWith(id, server_->metadata_.Serve(*request, visible)));
    }
    // A path this worker's table resolves goes to the miss threads; another may wait there
    // for the table to change, so it waits on the mount-wait threads instead.
    const bool known = service_->ResolvePath(protocol::PathOf(*request), /*wait=*/false).ok();
    FairPool* pool = known ? server_->miss_pool_.get() : server_->mount_wait_pool_.get();
    {
      MutexLock l(&mu_);
      ++outstanding_;
    }
    pool->Submit(id_, [self = shared_from_this(), id, req = std::move(request).value(),
                       visible = std::move(visible), received]() mutable {
      if (self->closed()) {
        self->Enqueue(Reply{});
        return;
      }
      uint32_t deadline_ms = protocol::DeadlineOf(req);
      if (deadline_ms > 0 && self->clock().NowMicros() - received > int64_t{deadline_ms} * 1000) {
        self->Enqueue(
            MetadataReplyWith(id, DeadlineExceededError("request expired in the worker queue")));
        return;
      }
      self->Enqueue(MetadataReplyWith(id, self->server_->metadata_.Serve(req, visible)));
    });
    return Status::Ok();
  }

  // Write requests: authorized here; WritePage, TruncateWrite and ReadWritten (local disk only)
  // answered inline, the others (they talk to the source) on a pool thread.
  Status DispatchWrite(const FrameHeader& header, const std::string& payload, int64_t received) {
    const uint64_t id = header.request_id;
    auto request = protocol::DecodeWriteRequest(header.type, payload);
    if (!request.ok()) {
      if (request.status().code() == StatusCode::kCorruption) return request.status();
      return Write(WriteReplyWith(id, request.status()));
    }
    WriteService* writes = options_.writes;
    if (writes == nullptr) {
      return Write(WriteReplyWith(
          id, FailedPreconditionError("worker " + service_->worker_id() + " takes no writes")));
    }
    // The paths the request changes, each needing the write grant (a rename: both names).
    std::string path;
    std::string second_path;
    const char* op = "write";
    if (const auto* open = std::get_if<protocol::OpenWriteRequest>(&*request)) path = open->path;
    if (const auto* rm = std::get_if<protocol::RemovePathRequest>(&*request)) {
      path = rm->path;
      op = "remove";
    }
    if (const auto* mkdir = std::get_if<protocol::MakeDirRequest>(&*request)) {
      path = mkdir->path;
      op = "mkdir";
    }
    if (const auto* sync = std::get_if<protocol::SyncPathRequest>(&*request)) {
      path = sync->path;
      op = "sync";
    }
    if (const auto* mv = std::get_if<protocol::RenameRequest>(&*request)) {
      path = mv->from;
      second_path = mv->to;
      op = "rename";
    }
    if (const auto* mv = std::get_if<protocol::HandOverRequest>(&*request)) {
      path = mv->from;
      second_path = mv->to;
      op = "rename";
    }
    if (options_.authorizer != nullptr) {
      for (const std::string* p : {&path, &second_path}) {
        if (p->empty()) continue;
        Status allowed = options_.authorizer->CheckWrite(identity(), *p, op, &audit_);
        if (!allowed.ok()) return Write(WriteReplyWith(id, std::move(allowed)));
      }
    }
    const std::string principal = identity().principal;
    if (const auto* read = std::get_if<protocol::ReadWrittenRequest>(&*request)) {
      // The file's bytes: its content before the open too (an open without truncate), so the
      // read grant on its path, like any read.
      if (options_.authorizer != nullptr) {
        StatusOr<std::string> of = writes->PathOf(principal, read->handle);
        if (!of.ok()) return Write(WriteReplyWith(id, of.status()));
        Status allowed =
            options_.authorizer->CheckAccess(identity(), *of, auth::Access::kRead, "read", &audit_);
        if (!allowed.ok()) return Write(WriteReplyWith(id, std::move(allowed)));
      }
    }
    if (header.type == MessageType::kWritePage || header.type == MessageType::kTruncateWrite ||
        header.type == MessageType::kReadWritten || header.type == MessageType::kKeepWrite) {
      return ServeSpoolRequest(id, writes, principal, *request, received);
    }
    WriteService::RecheckFn recheck;
    if (options_.authorizer != nullptr) {
      recheck = [authorizer = options_.authorizer, who = identity()](const std::string& p) {
        return authorizer->CheckWrite(who, p, "commit", nullptr);
      };
    }
    const bool known = path.empty() || service_->ResolvePath(path, /*wait=*/false).ok();
    FairPool* pool = known ? server_->miss_pool_.get() : server_->mount_wait_pool_.get();
    {
      MutexLock l(&mu_);
      ++outstanding_;
    }
    pool->Submit(id_, [self = shared_from_this(), id, writes, principal,
                       req = std::move(request).value(), recheck = std::move(recheck), received]() {
      if (self->closed()) {
        self->Enqueue(Reply{});
        return;
      }
      const uint32_t deadline_ms = protocol::DeadlineOf(req);
      if (deadline_ms > 0 && self->clock().NowMicros() - received > int64_t{deadline_ms} * 1000) {
        self->Enqueue(
            WriteReplyWith(id, DeadlineExceededError("request expired in the worker queue")));
        return;
      }
      self->Enqueue(WriteReplyWith(id, writes->Serve(principal, req, recheck)));
    });
    return Status::Ok();
  }

  // A request answered from a file's spool: here, unless the file is in a long operation (a
  // commit uploading it: seconds to minutes), which would stop this reader and every request
  // of the connection behind it; then on a pool thread once the operation ends.
  Status ServeSpoolRequest(uint64_t id, WriteService* writes, const std::string& principal,
                           const protocol::WriteRequest& request, int64_t received) {
    const auto* page = std::get_if<protocol::WritePageRequest>(&request);
    const uint64_t bytes = page != nullptr ? page->data.size() : 0;
    {
      MutexLock l(&mu_);
      // The copies of writes waiting off the reader are bounded: past kMaxParkedWriteBytes the
      // reader waits for them to be answered (TCP pushes back on the client), as it waited for
      // the long operation itself before.
      cv_.Wait(&mu_, [&]() REQUIRES(mu_) {
        return closed_ || parked_bytes_ == 0 || parked_bytes_ + bytes <= kMaxParkedWriteBytes;
      });
      if (closed_) return UnavailableError("connection closed");
      ++outstanding_;  // Answered by the writer if it is resumed later.
    }
    // A write that waited here longer than a client waits for its answer may have been sent
    // again since (on another connection, as the client gave up on this one) and overwritten
    // by a newer one: it is refused, not applied (the client sends it again if it still waits).
    if (page != nullptr && clock().NowMicros() - received > kMaxReaderWaitUs) {
      {
        MutexLock l(&mu_);
        --outstanding_;
      }
      cv_.NotifyAll();
      return Write(WriteReplyWith(
          id, DeadlineExceededError("the write waited too long for room for writes held off the "
                                    "reader; send it again")));
    }
    std::optional<StatusOr<protocol::WriteReply>> now =
        writes->ServeNow(principal, request, [&]() -> WriteService::ResumeFn {
          // A copy that owns its data: a WritePage's points into the frame buffer, which the
          // next frame reuses.
          auto parked = std::make_shared<ParkedWrite>();
          parked->request = request;
          if (auto* copy = std::get_if<protocol::WritePageRequest>(&parked->request)) {
            parked->data.assign(copy->data.begin(), copy->data.end());
            copy->data = std::span<const char>(parked->data.data(), parked->data.size());
            MutexLock l(&mu_);
            parked_bytes_ += parked->data.size();
          }
          return [self = shared_from_this(), id, writes, principal, parked,
                  received](std::shared_ptr<void> hold) {
            self->Resume(id, writes, principal, parked, received, std::move(hold));
          };
        });
    if (!now) return Status::Ok();
    {
      MutexLock l(&mu_);
      --outstanding_;
    }
    cv_.NotifyAll();
    return Write(WriteReplyWith(id, std::move(*now)));
  }

  struct ParkedWrite {
    std::string data;
    protocol::WriteRequest request;
  };

  // ServeSpoolRequest's request, once what it waited for ended (on that thread: hands it to a
  // pool, with `hold`, which the task drops once it has answered). Under mu_, so a connection
  // being shut down (and its server stopping) is never handed a task after it closed.
  void Resume(uint64_t id, WriteService* writes, const std::string& principal,
              std::shared_ptr<const ParkedWrite> parked, int64_t received,
              std::shared_ptr<void> hold) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      if (!closed_) {
        SubmitResumed(id, writes, principal, std::move(parked), received, std::move(hold));
        return;
      }
      --outstanding_;
      parked_bytes_ -= parked->data.size();
    }
    cv_.NotifyAll();
    hold.reset();  // Not under mu_: its release may hand off this connection's next requests.
  }

  // A parked write's copy is gone (answered, or dropped).
  void Unpark(const ParkedWrite& parked) EXCLUDES(mu_) {
    if (parked.data.empty()) return;
    {
      MutexLock l(&mu_);
      parked_bytes_ -= parked.data.size();
    }
    cv_.NotifyAll();
  }

  void SubmitResumed(uint64_t id, WriteService* writes, const std::string& principal,
                     std::shared_ptr<const ParkedWrite> parked, int64_t received,
                     std::shared_ptr<void> hold) REQUIRES(mu_) {
    server_->miss_pool_->Submit(id_, [self = shared_from_this(), id, writes, principal,
                                      parked = std::move(parked), received,
                                      hold = std::move(hold)] {
      Reply reply;
      const uint32_t deadline_ms = protocol::DeadlineOf(parked->request);
      if (self->closed()) {
        // Dropped: an empty reply balances the count.
      } else if (deadline_ms > 0 &&
                 self->clock().NowMicros() - received > int64_t{deadline_ms} * 1000) {
        reply = WriteReplyWith(id, DeadlineExceededError("request expired in the worker queue"));
      } else {
        reply = WriteReplyWith(id, writes->Serve(principal, parked->request));
      }
      self->Unpark(*parked);
      self->Enqueue(std::move(reply));
    });
  }

  static Reply WriteReplyWith(uint64_t id, StatusOr<protocol::WriteReply> answer) {
    Reply reply;
    reply.id = id;
    reply.write = true;
    if (answer.ok()) {
      reply.written = std::move(answer).value();
    } else {
      reply.written = protocol::WriteErrorReply(answer.status());
    }
    return reply;
  }

  static Reply MetadataReplyWith(uint64_t id, StatusOr<protocol::MetadataReply> answer) {
    Reply reply;
    reply.id = id;
    reply.metadata = true;
    if (answer.ok()) {
      reply.listing = std::move(answer).value();
    } else {
      reply.listing.status = answer.status().code();
      reply.listing.error_message = answer.status().message();
    }
    return reply;
  }

  // `received`: when the request's header arrived (clock() microseconds).
  Reply Handle(uint64_t id, const protocol::Request& request, int64_t received) {
    Reply reply;
    reply.id = id;
    reply.data = protocol::WantsData(request);
    const protocol::RequestBase& base = protocol::BaseOf(request);
    if (base.deadline_ms > 0 && clock().NowMicros() - received > int64_t{base.deadline_ms} * 1000) {
      reply.error = DeadlineExceededError("request expired in the worker queue");
      return reply;
    }
    return ReplyWith(id, request, service_->Serve(request));
  }

  static Reply ReplyWith(uint64_t id, const protocol::Request& request,
                         StatusOr<PageService::Served> served) {
    Reply reply;
    reply.id = id;
    reply.data = protocol::WantsData(request);
    if (!served.ok()) {
      reply.error = served.status();
      return reply;
    }
    reply.served = std::move(served).value();
    if (reply.served.data.reader) reply.page = protocol::BaseOf(request).page;
    return reply;
  }

  // From a pool thread: hands the reply to the writer (never blocks on the socket).
  void Enqueue(Reply reply) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      if (closed_) {
        --outstanding_;
        return;
      }
      outbox_.push_back(std::move(reply));
    }
    cv_.NotifyAll();
  }

  void WriteLoop() {
    while (true) {
      Reply reply;
      {
        MutexLock l(&mu_);
        cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return closed_ || !outbox_.empty(); });
        if (closed_) break;
        reply = std::move(outbox_.front());
        outbox_.pop_front();
      }
      Status s = Write(reply);
      {
        MutexLock l(&mu_);
        --outstanding_;
      }
      cv_.NotifyAll();
      if (!s.ok()) {
        if (s.code() == StatusCode::kDeadlineExceeded) {
          server_->counters_->timed_out->Increment();
          spdlog::info("closing connection from {}: it stopped reading its replies ({})",
                       stream_->PeerName(), s.ToString());
        }
        Shutdown();
        break;
      }
    }
    {
      MutexLock l(&mu_);
      outstanding_ -= static_cast<int>(outbox_.size());
      outbox_.clear();  // Releases the pages the dropped replies held.
    }
    writer_done_ = true;
  }

  Status Write(const Reply& reply) {
    if (reply.write) {
      return Send(MessageType::kWriteReply, reply.id, protocol::EncodeWriteReply(reply.written));
    }
    if (reply.metadata) {
      std::string payload = protocol::EncodeMetadataReply(reply.listing);
      if (payload.size() > protocol::kMaxPayload) {
        protocol::MetadataReply too_big;
        too_big.status = StatusCode::kInternal;
        too_big.error_message = "the listing page is larger than a frame: ask for fewer entries";
        payload = protocol::EncodeMetadataReply(too_big);
      }
      return Send(MessageType::kMetadataReply, reply.id, payload);
    }
    if (!reply.data) {
      protocol::ControlReply control;
      if (!reply.error.ok()) {
        control.status = reply.error.code();
        control.error_message = reply.error.message();
      } else {
        control.source = *reply.served.control;
      }
      return Send(MessageType::kControlReply, reply.id, protocol::EncodeControlReply(control));
    }
    if (!reply.error.ok()) return SendError(reply.id, reply.error);
    const PageResult& result = reply.served.data;
    protocol::PageReplyMeta header;
    header.source = result.source;
    header.data_offset = result.range.begin;
    header.data_length = result.range.size();
    header.checksums = result.checksums;
    std::string meta = protocol::EncodePageReplyMeta(header);
    FrameHeader frame{MessageType::kPageReply, 0, reply.id,
                      static_cast<uint32_t>(meta.size() + header.data_length)};
    std::array<char, protocol::kFrameHeaderSize> raw;
    protocol::EncodeFrameHeader(frame, raw.data());

    MutexLock l(&write_mu_);
    if (result.reader && result.reader->native_fd() >= 0) {
      std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                                std::span<const char>(meta)};
      // A page file truncated after Open makes sendfile come up short: the frame is then
      // incomplete, so the connection must close (the client retries elsewhere).
      Status sent = stream_->SendFile(bufs, result.reader->native_fd(),
                                      result.reader->data_file_offset() + result.range.begin,
                                      result.range.size());
      if (sent.code() == StatusCode::kIoError) {
        service_->DropCachedPage(reply.page, *result.reader);
      }
      return sent;
    }
    std::span<const char> data;
    std::string copy;
    if (result.page) {
      data = result.page->span().subspan(result.range.begin, result.range.size());
    } else if (result.range.size() > 0) {
      copy.resize(result.range.size());
      CAIRN_RETURN_IF_ERROR(result.CopyTo(copy));
      data = copy;
    }
    std::array<std::span<const char>, 3> bufs{std::span<const char>(raw),
                                              std::span<const char>(meta), data};
    return stream_->WriteAll(bufs);
  }

  Status SendError(uint64_t id, const Status& error) {
    protocol::PageReplyMeta reply;
    reply.status = error.code();
    reply.error_message = error.message();
    return Send(MessageType::kPageReply, id, protocol::EncodePageReplyMeta(reply));
  }

  Status Send(MessageType type, uint64_t id, const std::string& payload) {
    FrameHeader header{type, 0, id, static_cast<uint32_t>(payload.size())};
    std::array<char, protocol::kFrameHeaderSize> raw;
    protocol::EncodeFrameHeader(header, raw.data());
    std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                              std::span<const char>(payload)};
    MutexLock l(&write_mu_);
    return stream_->WriteAll(bufs);
  }

  const uint64_t id_;  // The fair pools' source id.
  std::unique_ptr<net::Stream> stream_;
  WorkerServer* const server_;
  PageService* const service_;
  const ServerOptions& options_;
  Mutex write_mu_;  // Serialises whole replies on the stream.
  Mutex mu_;
  CondVar cv_;  // outstanding_, outbox_ or closed_ changed.
  // Requests handed to a pool whose reply has not been written (or dropped) yet.
  int outstanding_ GUARDED_BY(mu_) = 0;
  // Bytes of WritePage copies waiting off the reader for their file (ServeSpoolRequest).
  static constexpr uint64_t kMaxParkedWriteBytes = 32 << 20;
  // Past this wait for parked room a WritePage is refused (well under the clients' 5 s).
  static constexpr int64_t kMaxReaderWaitUs = 1'000'000;
  uint64_t parked_bytes_ GUARDED_BY(mu_) = 0;
  std::deque<Reply> outbox_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  std::atomic<bool> greeted_{false};
  // Reader thread only.
  auth::Identity identity_;
  bool identity_known_ = false;
  ConnectionAudit audit_{stream_->PeerName()};
  std::atomic<bool> reader_done_{false};
  std::atomic<bool> writer_done_{false};
  std::thread reader_;
  std::thread writer_;
};

StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(PageService* service,
                                                            const ServerOptions& options) {
  if (options.miss_threads < 1 || options.mount_wait_threads < 1 || options.max_connections < 1 ||
      options.max_outstanding_per_connection < 1) {
    return InvalidArgumentError("server thread, connection and request limits must be >= 1");
  }
  // sendfile() has no MSG_NOSIGNAL: a client that hangs up mid-reply would raise SIGPIPE and
  // kill the whole worker. Closed connections are reported as EPIPE errors instead.
  signal(SIGPIPE, SIG_IGN);
  auto listener = net::Listener::Bind(options.host, options.port);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<WorkerServer> server(
      new WorkerServer(service, std::move(listener).value(), options));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

WorkerServer::WorkerServer(PageService* service, std::unique_ptr<net::Listener> listener,
                           const ServerOptions& options)
    : service_(service),
      options_(options),
      listener_(std::move(listener)),
      miss_pool_(std::make_unique<FairPool>(options.miss_threads, "miss")),
      mount_wait_pool_(std::make_unique<FairPool>(options.mount_wait_threads, "mount-wait")) {
  std::unique_ptr<metrics::Registry> owned;
  metrics::Registry* registry = options.registry;
  if (registry == nullptr) {
    owned = std::make_unique<metrics::Registry>();
    registry = owned.get();
  }
  counters_ = std::make_unique<Counters>(registry);
  counters_->owned = std::move(owned);
}

WorkerServer::~WorkerServer() { Stop(); }

void WorkerServer::AcceptLoop() {
  while (!stopping_.load()) {
    auto stream = listener_->Accept();
    if (!stream.ok()) {
      if (stopping_.load()) return;
      spdlog::warn("accept failed: {}", stream.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::unique_ptr<net::Stream> accepted = std::move(stream).value();
    if (options_.tls != nullptr) {  // Outside mu_: it may reload certificate files.
      auto wrapped = options_.tls->WrapAccepted(std::move(accepted));
      if (!wrapped.ok()) {
        spdlog::warn("dropping a connection: {}", wrapped.status().ToString());
        continue;
      }
      accepted = std::move(wrapped).value();
    }
    Admit(std::move(accepted));
  }
}

void WorkerServer::Admit(std::unique_ptr<net::Stream> stream) {
  MutexLock l(&mu_);
  if (stopping_.load()) return;
  ReapFinished();
  size_t live = 0;
  for (const auto& c : connections_) live += c->closed() ? 0 : 1;
  if (live >= static_cast<size_t>(options_.max_connections)) {
    // Full. A connection that has not sent a request yet costs the most and is worth the
    // least (a port scan, a stalled handshake, or a silent flood): the oldest one goes.
    std::shared_ptr<Connection> silent;
    for (const auto& c : connections_) {
      if (!c->greeted() && !c->closed()) {
        silent = c;
        break;
      }
    }
    counters_->refused->Increment();
    if (silent == nullptr) {
      spdlog::warn("refusing a connection from {}: {} connections open (the cap)",
                   stream->PeerName(), live);
      return;  // The stream closes here.
    }
    silent->Shutdown();
  }
  auto conn =
      std::make_shared<Connection>(next_connection_id_.fetch_add(1), std::move(stream), this);
  connections_.push_back(conn);
  counters_->accepted->Increment();
  conn->Start();
}

void WorkerServer::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->finished()) {
      (*it)->Join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
  counters_->connections->Set(static_cast<double>(connections_.size()));
}

ServerStats WorkerServer::Stats() {
  ServerStats s;
  {
    MutexLock l(&mu_);
    for (const auto& c : connections_) {
      s.connections += c->closed() ? 0 : 1;
      s.parked_write_bytes += c->parked_bytes();
    }
  }
  s.accepted = counters_->accepted->value();
  s.refused = counters_->refused->value();
  s.timed_out = counters_->timed_out->value();
  s.tls_refused = counters_->tls_refused->value();
  s.queued_requests = miss_pool_->QueueLength() + mount_wait_pool_->QueueLength();
  return s;
}

void WorkerServer::Stop() {
  if (stopping_.exchange(true)) return;
  listener_->Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::shared_ptr<Connection>> conns;
  {
    MutexLock l(&mu_);
    conns.swap(connections_);
  }
  for (auto& c : conns) c->Shutdown();
  for (auto& c : conns) c->Join();
  // Drain queued misses (their replies are dropped: the connections are closed).
  miss_pool_.reset();
  mount_wait_pool_.reset();
}

}  // namespace cairn::worker
