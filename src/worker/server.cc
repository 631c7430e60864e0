#include "worker/server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <csignal>
#include <chrono>

#include "protocol/wire.h"

namespace cairn::worker {

using protocol::FrameHeader;
using protocol::MessageType;

namespace {
constexpr uint32_t kMaxRequestPayload = 64 * 1024;
}  // namespace

class WorkerServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::unique_ptr<net::Stream> stream, PageService* service, ThreadPool* miss_pool)
      : stream_(std::move(stream)), service_(service), miss_pool_(miss_pool) {}

  void Start() {
    thread_ = std::thread([self = shared_from_this()] { self->ReadLoop(); });
  }
  void Shutdown() { stream_->Shutdown(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool finished() const { return finished_.load(); }

 private:
  void ReadLoop() {
    std::string peer = stream_->PeerName();
    Status s = Serve();
    if (s.code() != StatusCode::kUnavailable) {
      spdlog::warn("closing connection from {}: {}", peer, s.ToString());
    } else {
      spdlog::debug("connection from {} ended: {}", peer, s.ToString());
    }
    stream_->Shutdown();
    finished_ = true;
  }

  Status Serve() {
    std::array<char, protocol::kFrameHeaderSize> raw;
    std::string payload;
    while (true) {
      CAIRN_RETURN_IF_ERROR(stream_->ReadFull(raw));
      auto received = std::chrono::steady_clock::now();
      CAIRN_ASSIGN_OR_RETURN(FrameHeader header, protocol::DecodeFrameHeader(raw));
      if (header.payload_length > kMaxRequestPayload) {
        return CorruptionError("request payload too large: " +
                               std::to_string(header.payload_length));
      }
      payload.resize(header.payload_length);
      Status r = stream_->ReadFull(payload);
      if (!r.ok()) return CorruptionError("truncated frame: " + r.message());
      switch (header.type) {
        case MessageType::kHello: {
          protocol::HelloReply hello;
          hello.page_size = service_->page_size();
          hello.worker_id = service_->worker_id();
          hello.instance_token = service_->options().instance_token;
          hello.cache_dirs = service_->options().cache_dirs;
          CAIRN_RETURN_IF_ERROR(Send(MessageType::kHelloReply, header.request_id,
                                     protocol::EncodeHelloReply(hello)));
          break;
        }
        case MessageType::kPing:
          CAIRN_RETURN_IF_ERROR(Send(MessageType::kPong, header.request_id, ""));
          break;
        case MessageType::kReadPage:
          CAIRN_RETURN_IF_ERROR(Dispatch(header.request_id, payload, received));
          break;
        default:
          return CorruptionError("unexpected message type from a client");
      }
    }
  }

  Status Dispatch(uint64_t id, const std::string& payload,
                  std::chrono::steady_clock::time_point received) {
    auto request = protocol::DecodeReadPageRequest(payload);
    if (!request.ok()) {
      if (request.status().code() == StatusCode::kCorruption) return request.status();
      return SendError(id, request.status());
    }
    if (service_->LikelyCached(*request)) return Handle(id, *request, received);
    miss_pool_->Submit([self = shared_from_this(), id, req = std::move(request).value(),
                        received] {
      Status s = self->Handle(id, req, received);
      if (!s.ok()) self->stream_->Shutdown();  // The reader thread then sees the close.
    });
    return Status::Ok();
  }

  Status Handle(uint64_t id, const protocol::ReadPageRequest& request,
                std::chrono::steady_clock::time_point received) {
    if (request.deadline_ms > 0 &&
        std::chrono::steady_clock::now() - received >
            std::chrono::milliseconds(request.deadline_ms)) {
      return SendError(id, DeadlineExceededError("request expired in the worker queue"));
    }
    if (request.flags & protocol::kControlFlags) {
      auto source = service_->ControlPage(request);
      if (!source.ok()) return SendError(id, source.status());
      protocol::ReadPageReplyHeader control;
      control.source = *source;
      return Send(MessageType::kReadPageReply, id, protocol::EncodeReadPageReplyHeader(control));
    }
    auto result = service_->ReadPage(request);
    if (!result.ok()) return SendError(id, result.status());
    protocol::ReadPageReplyHeader reply;
    reply.source = result->source;
    reply.data_offset = result->range.begin;
    reply.data_length = result->range.size();
    reply.checksums = result->checksums;
    std::string meta = protocol::EncodeReadPageReplyHeader(reply);
    FrameHeader header{MessageType::kReadPageReply, 0, id,
                       static_cast<uint32_t>(meta.size() + reply.data_length)};
    std::array<char, protocol::kFrameHeaderSize> raw;
    protocol::EncodeFrameHeader(header, raw.data());

    MutexLock l(&write_mu_);
    if (result->reader && result->reader->native_fd() >= 0) {
      std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                                std::span<const char>(meta)};
      CAIRN_RETURN_IF_ERROR(stream_->WriteAll(bufs));
      // A page file truncated after Open makes sendfile come up short: the frame is then
      // incomplete, so the connection must close (the client retries elsewhere).
      Status sent = stream_->SendFile(result->reader->native_fd(),
                                      result->reader->data_file_offset() + result->range.begin,
                                      result->range.size());
      if (sent.code() == StatusCode::kIoError) service_->DropCachedPage(request);
      return sent;
    }
    std::span<const char> data;
    std::string copy;
    if (result->page) {
      data = result->page->span().subspan(result->range.begin, result->range.size());
    } else {
      copy.resize(result->range.size());
      CAIRN_RETURN_IF_ERROR(result->CopyTo(copy));
      data = copy;
    }
    std::array<std::span<const char>, 3> bufs{std::span<const char>(raw),
                                              std::span<const char>(meta), data};
    return stream_->WriteAll(bufs);
  }

  Status SendError(uint64_t id, const Status& error) {
    protocol::ReadPageReplyHeader reply;
    reply.status = error.code();
    reply.error_message = error.message();
    return Send(MessageType::kReadPageReply, id, protocol::EncodeReadPageReplyHeader(reply));
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

  std::unique_ptr<net::Stream> stream_;
  PageService* service_;
  ThreadPool* miss_pool_;
  Mutex write_mu_;  // Serialises whole replies on the stream.
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(PageService* service,
                                                            const ServerOptions& options) {
  // sendfile() has no MSG_NOSIGNAL: a client that hangs up mid-reply would raise SIGPIPE and
  // kill the whole worker. Closed connections are reported as EPIPE errors instead.
  signal(SIGPIPE, SIG_IGN);
  auto listener = net::Listener::Bind(options.host, options.port);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<WorkerServer> server(
      new WorkerServer(service, std::move(listener).value(), options.miss_threads));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

WorkerServer::WorkerServer(PageService* service, std::unique_ptr<net::Listener> listener,
                           int miss_threads)
    : service_(service),
      listener_(std::move(listener)),
      miss_pool_(std::make_unique<ThreadPool>(miss_threads, "miss")) {}

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
    auto conn = std::make_shared<Connection>(std::move(stream).value(), service_,
                                             miss_pool_.get());
    MutexLock l(&mu_);
    if (stopping_.load()) {
      conn->Shutdown();
      return;
    }
    ReapFinished();
    connections_.push_back(conn);
    conn->Start();
  }
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
  miss_pool_.reset();  // Drains queued misses (their writes fail fast on closed streams).
}

}  // namespace cairn::worker
