#include "http/server.h"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <strings.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "common/thread_annotations.h"
#include "tls/tls_context.h"

namespace cairn::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::string_view Request::Header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (field.size() == name.size() && strncasecmp(field.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return {};
}

Response Response::Text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

namespace {

using BeastRequest = bhttp::request<bhttp::string_body>;
using BeastResponse = bhttp::response<bhttp::string_body>;

// After an error response, how long to read and drop what the client still sends before closing:
// closing with unread input makes the kernel send RST, which can destroy the response in flight.
constexpr std::chrono::milliseconds kLingerTime{500};
constexpr size_t kLingerBytes = 64 * 1024;
// A failed accept (out of descriptors) is retried after this pause instead of spinning.
constexpr std::chrono::milliseconds kAcceptRetry{100};
constexpr size_t kFirstReadBytes = 4096;

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Request ToRequest(BeastRequest&& in) {
  Request r;
  r.method = std::string(in.method_string());
  r.target = std::string(in.target());
  size_t q = r.target.find('?');
  r.path = r.target.substr(0, q);
  if (q != std::string::npos) r.query = r.target.substr(q + 1);
  r.version = in.version();
  r.keep_alive = in.keep_alive();
  for (const auto& field : in) {
    r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  r.body = std::move(in.body());
  return r;
}

// The status the server answers for a failed read of a request; 0: close without an answer
// (the peer went away or the connection was cut).
int StatusForReadError(const error_code& ec) {
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) return 431;
  if (ec == bhttp::error::body_limit) return 413;
  if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return 400;  // The parser refused the bytes.
  }
  return 0;
}

std::string Reason(int status) {
  return std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(status)));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Impl: the acceptor, the threads, and the table of connections (for the caps).
//
// Lock order: Impl::mu_ only; it is never held while calling into Asio except to post.
class Server::Impl {
 public:
  class Session;

  explicit Impl(ServerOptions options) : options_(std::move(options)), acceptor_(io_) {}
  ~Impl() { Stop(); }

  Status Listen();
  Status StartThreads();
  void Stop() EXCLUDES(stop_mu_, mu_);
  uint16_t port() const { return port_; }
  size_t open_connections() const EXCLUDES(mu_);

  const ServerOptions& options() const { return options_; }
  std::shared_ptr<asio::ssl::context> SslContext() EXCLUDES(ssl_mu_);
  void Register(Session* session) EXCLUDES(mu_);
  void Unregister(Session* session) EXCLUDES(mu_);
  void RefusalDone() EXCLUDES(mu_);

 private:
  void Accept();
  void OnAccept(tcp::socket socket) EXCLUDES(mu_);
  // Makes room for a connection from `peer_ip` under the caps: closes the longest-idle
  // connection (of that peer, when the peer is at its cap). False if every candidate is busy.
  bool MakeRoomLocked(const std::string& peer_ip) REQUIRES(mu_);

  const ServerOptions options_;
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;

  Mutex stop_mu_;
  bool stopped_ GUARDED_BY(stop_mu_) = false;
  std::atomic<bool> stopping_{false};

  mutable Mutex mu_;
  std::list<Session*> sessions_ GUARDED_BY(mu_);
  size_t refusing_ GUARDED_BY(mu_) = 0;  // Sessions answering 503 (bounded too).

  Mutex ssl_mu_;
  std::shared_ptr<ssl_ctx_st> ssl_native_ GUARDED_BY(ssl_mu_);
  std::shared_ptr<asio::ssl::context> ssl_context_ GUARDED_BY(ssl_mu_);

  // Last: destroyed first, so that the sessions its pending handlers own unregister while the
  // table above still exists.
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::optional<asio::steady_timer> accept_retry_;
};

// ---------------------------------------------------------------------------------------------
// Session: one connection. Every handler runs on the connection's strand (the socket's executor);
// only `idle_`, `idle_since_us_` and `closing_` are read from other threads (by MakeRoomLocked).
class Server::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Impl* server, tcp::socket socket, std::string peer_ip, bool refuse)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        peer_ip_(std::move(peer_ip)),
        refuse_(refuse) {
    error_code ec;
    tcp::endpoint remote = socket_.remote_endpoint(ec);
    if (!ec) {
      peer_.address =
          remote.address().is_v6()
              ? "[" + remote.address().to_string() + "]:" + std::to_string(remote.port())
              : remote.address().to_string() + ":" + std::to_string(remote.port());
    }
    idle_since_us_ = SteadyMicros();
  }

  ~Session() {
    if (registered_) server_->Unregister(this);
    if (refuse_) server_->RefusalDone();
  }

  void Start() {
    if (refuse_) {
      // No room: a plaintext peer hears why; a TLS one is closed (it could not read an answer
      // before a handshake this server has no room for).
      if (server_->options().tls != nullptr) return CloseNow();
      return WriteError(503, "too many connections\n");
    }
    server_->Register(this);
    registered_ = true;
    if (server_->options().tls != nullptr) return DetectTls();
    ReadRequest();
  }

  // From any thread: closes the connection (its pending operations end).
  void CloseFromAnyThread() {
    closing_ = true;
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
  }

  const std::string& peer_ip() const { return peer_ip_; }
  bool idle() const { return idle_.load() && !closing_.load(); }
  bool closing() const { return closing_.load(); }
  int64_t idle_since_us() const { return idle_since_us_.load(); }
  void MarkClosing() { closing_ = true; }

  // On the strand, or once no thread runs the io_context: closes the connection now.
  void CloseNow() {
    closing_ = true;
    Disarm();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  enum class Deadline { kCancel, kClose };

  // Runs `fn` with the connection's stream: the TLS stream once there is one, else the socket.
  template <typename Fn>
  void WithStream(Fn&& fn) {
    if (tls_ != nullptr) {
      fn(*tls_);
    } else {
      fn(socket_);
    }
  }

  // Arms the one timer: at expiry, `action` cancels the pending operation (its handler then
  // sees timed_out_) or closes the connection.
  void Arm(std::chrono::milliseconds after, Deadline action) {
    timed_out_ = false;
    const uint64_t generation = ++timer_generation_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), generation, action](const error_code& ec) {
      if (ec || generation != self->timer_generation_) return;
      self->timed_out_ = true;
      error_code ignored;
      if (action == Deadline::kCancel) {
        self->socket_.cancel(ignored);
      } else {
        self->CloseNow();
      }
    });
  }
  void Disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void DetectTls() {
    Arm(server_->options().idle_timeout, Deadline::kClose);
    beast::async_detect_ssl(
        socket_, buffer_, [self = shared_from_this()](const error_code& ec, bool is_tls) {
          if (ec || self->closing_) return self->CloseNow();
          if (!is_tls) {
            return self->WriteError(
                400, "this endpoint requires TLS: use https:// (docs/security.md)\n");
          }
          self->Handshake();
        });
  }

  void Handshake() {
    std::shared_ptr<asio::ssl::context> context = server_->SslContext();
    if (context == nullptr) return CloseNow();
    ssl_context_ = std::move(context);
    tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, *ssl_context_);
    Arm(server_->options().request_timeout, Deadline::kClose);
    tls_->async_handshake(asio::ssl::stream_base::server, buffer_.data(),
                          [self = shared_from_this()](const error_code& ec, size_t used) {
                            self->Disarm();
                            if (ec || self->closing_) {
                              spdlog::debug("http: TLS handshake with {} failed: {}",
                                            self->peer_.address, ec.message());
                              return self->CloseNow();
                            }
                            self->buffer_.consume(used);
                            tls::PeerCertificate cert =
                                tls::PeerCertificateOf(self->tls_->native_handle());
                            self->peer_.encrypted = true;
                            self->peer_.principal = std::move(cert.principal);
                            self->peer_.cluster_node = cert.cluster_node;
                            self->ReadRequest();
                          });
  }

  // Idle until a request's first byte arrives (unless pipelined bytes are already buffered),
  // then the whole request within request_timeout of it.
  void ReadRequest() {
    if (closing_) return CloseNow();
    if (buffer_.size() > 0) return ReadRest();
    idle_since_us_ = SteadyMicros();
    idle_ = true;
    Arm(server_->options().idle_timeout, Deadline::kClose);
    WithStream([this](auto& stream) {
      stream.async_read_some(buffer_.prepare(kFirstReadBytes),
                             [self = shared_from_this()](const error_code& ec, size_t n) {
                               self->idle_ = false;
                               if (ec || self->closing_) return self->CloseNow();
                               self->buffer_.commit(n);
                               self->ReadRest();
                             });
    });
  }

  void ReadRest() {
    idle_ = false;
    const ServerOptions& o = server_->options();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(std::min<size_t>(o.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(o.max_body_bytes);
    Arm(o.request_timeout, Deadline::kCancel);
    WithStream([this](auto& stream) {
      bhttp::async_read(
          stream, buffer_, *parser_,
          [self = shared_from_this()](const error_code& ec, size_t) { self->OnRequest(ec); });
    });
  }

  void OnRequest(const error_code& ec) {
    const bool timed_out = timed_out_;
    Disarm();
    if (closing_) return CloseNow();
    if (timed_out) {
      // A TLS stream cut in the middle of a record cannot carry an answer.
      if (tls_ != nullptr) return CloseNow();
      return WriteError(408, "request not received in time\n");
    }
    if (ec) {
      const int status = StatusForReadError(ec);
      if (status == 0) return CloseNow();
      return WriteError(status, Reason(status) + "\n");
    }
    Request request = ToRequest(parser_->release());
    request.peer = peer_;
    parser_.reset();
    Response response;
    const Handler& handler = server_->options().handler;
    try {
      response = handler(request);
    } catch (const std::exception& e) {
      spdlog::error("http: handler failed on {} {}: {}", request.method, request.path, e.what());
      response = Response::Text(500, "internal error\n");
      response.close = true;
    } catch (...) {
      spdlog::error("http: handler failed on {} {}", request.method, request.path);
      response = Response::Text(500, "internal error\n");
      response.close = true;
    }
    const bool keep_alive = request.keep_alive && !response.close;
    Write(std::move(response), request.method == "HEAD", keep_alive, /*linger=*/false);
  }

  void WriteError(int status, std::string body) {
    Response r = Response::Text(status, std::move(body));
    Write(std::move(r), /*head_only=*/false, /*keep_alive=*/false, /*linger=*/true);
  }

  // Responses are HTTP/1.1 whatever the request's version (RFC 9110 section 6.2).
  void Write(Response response, bool head_only, bool keep_alive, bool linger) {
    out_ = std::make_unique<BeastResponse>(static_cast<bhttp::status>(response.status), 11);
    out_->set(bhttp::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) out_->set(name, value);
    out_->keep_alive(keep_alive);
    // Said either way: HTTP/1.0 clients need "keep-alive", and tools read it.
    out_->set(bhttp::field::connection, keep_alive ? "keep-alive" : "close");
    if (head_only) {
      out_->set(bhttp::field::content_length, std::to_string(response.body.size()));
    } else {
      out_->body() = std::move(response.body);
      out_->prepare_payload();
    }
    idle_ = false;
    Arm(server_->options().request_timeout, Deadline::kClose);
    WithStream([this, keep_alive, linger](auto& stream) {
      bhttp::async_write(
          stream, *out_,
          [self = shared_from_this(), keep_alive, linger](const error_code& ec, size_t) {
            self->Disarm();
            self->out_.reset();
            if (ec || self->closing_) return self->CloseNow();
            if (keep_alive) return self->ReadRequest();
            if (linger) return self->Linger();
            self->CloseNow();
          });
    });
  }

  // Half-closes, then drops what the client still sends (bounded in time and bytes) so that the
  // close does not turn into a reset that destroys the answer in flight.
  void Linger() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    Arm(kLingerTime, Deadline::kClose);
    buffer_.consume(buffer_.size());
    Drain();
  }
  void Drain() {
    socket_.async_read_some(asio::buffer(drain_, sizeof(drain_)),
                            [self = shared_from_this()](const error_code& ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->closing_ || self->drained_ > kLingerBytes) {
                                return self->CloseNow();
                              }
                              self->Drain();
                            });
  }

  Impl* const server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  const std::string peer_ip_;
  const bool refuse_;
  bool registered_ = false;
  Peer peer_;
  std::shared_ptr<asio::ssl::context> ssl_context_;  // Outlives tls_.
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::unique_ptr<BeastResponse> out_;
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  char drain_[4096];
  size_t drained_ = 0;
  std::atomic<bool> idle_{true};
  std::atomic<bool> closing_{false};
  std::atomic<int64_t> idle_since_us_{0};
};

// ---------------------------------------------------------------------------------------------

Status Server::Impl::Listen() {
  error_code ec;
  std::string host = options_.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(host, std::to_string(options_.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return InvalidArgumentError("http: cannot resolve listen address '" + options_.host +
                                "': " + (ec ? ec.message() : "no address"));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec && endpoint.address().is_v6()) acceptor_.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return ErrnoToStatus(ec.value(), "http: cannot listen on " + options_.host + ":" +
                                         std::to_string(options_.port));
  }
  port_ = acceptor_.local_endpoint(ec).port();
  Accept();
  return Status::Ok();
}

Status Server::Impl::StartThreads() {
  try {
    for (int i = 0; i < options_.threads; ++i) {
      threads_.emplace_back([this] {
        for (;;) {
          try {
            io_.run();
            return;
          } catch (const std::exception& e) {
            spdlog::error("http: an I/O handler failed: {}", e.what());
          }
        }
      });
    }
  } catch (const std::system_error& e) {
    return InternalError(std::string("http: cannot start a thread: ") + e.what());
  }
  return Status::Ok();
}

void Server::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](const error_code& ec, tcp::socket socket) {
    if (stopping_) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      spdlog::warn("http: accept failed: {}", ec.message());
      accept_retry_.emplace(io_, kAcceptRetry);
      accept_retry_->async_wait([this](const error_code& e) {
        if (!e && !stopping_) Accept();
      });
      return;
    }
    try {
      OnAccept(std::move(socket));
    } catch (const std::exception& e) {  // Out of memory: drop this one, keep accepting.
      spdlog::error("http: cannot take a connection: {}", e.what());
    }
    Accept();
  });
}

void Server::Impl::OnAccept(tcp::socket socket) {
  error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return;  // Gone already.
  std::string peer_ip = remote.address().to_string();
  bool refuse = false;
  {
    MutexLock l(&mu_);
    if (!MakeRoomLocked(peer_ip)) {
      // Refusals are answered by sessions too; past a bound, new connections are just closed.
      if (refusing_ >= options_.max_connections) return;
      refuse = true;
      ++refusing_;
    }
  }
  std::make_shared<Session>(this, std::move(socket), std::move(peer_ip), refuse)->Start();
}

void Server::Impl::RefusalDone() {
  MutexLock l(&mu_);
  --refusing_;
}

bool Server::Impl::MakeRoomLocked(const std::string& peer_ip) {
  const size_t per_peer_cap = std::min(options_.max_connections_per_peer, options_.max_connections);
  size_t total = 0;
  size_t of_peer = 0;
  Session* oldest_any = nullptr;
  Session* oldest_of_peer = nullptr;
  for (Session* s : sessions_) {
    if (s->closing()) continue;
    ++total;
    const bool same = s->peer_ip() == peer_ip;
    if (same) ++of_peer;
    if (!s->idle()) continue;
    if (oldest_any == nullptr || s->idle_since_us() < oldest_any->idle_since_us()) oldest_any = s;
    if (same && (oldest_of_peer == nullptr || s->idle_since_us() < oldest_of_peer->idle_since_us()))
      oldest_of_peer = s;
  }
  Session* victim = nullptr;
  if (of_peer >= per_peer_cap) {
    victim = oldest_of_peer;
  } else if (total >= options_.max_connections) {
    victim = oldest_any;
  } else {
    return true;
  }
  if (victim == nullptr) return false;
  // A session in its destructor (waiting for mu_ to unregister) cannot be locked: it is gone.
  std::shared_ptr<Session> alive = victim->weak_from_this().lock();
  victim->MarkClosing();
  if (alive != nullptr) alive->CloseFromAnyThread();
  return true;
}

void Server::Impl::Register(Session* session) {
  MutexLock l(&mu_);
  sessions_.push_back(session);
}

void Server::Impl::Unregister(Session* session) {
  MutexLock l(&mu_);
  sessions_.remove(session);
}

size_t Server::Impl::open_connections() const {
  MutexLock l(&mu_);
  size_t n = 0;
  for (Session* s : sessions_) n += s->closing() ? 0 : 1;
  return n;
}

std::shared_ptr<asio::ssl::context> Server::Impl::SslContext() {
  std::shared_ptr<ssl_ctx_st> native = options_.tls->NativeServerContext();
  MutexLock l(&ssl_mu_);
  if (native != ssl_native_ || ssl_context_ == nullptr) {
    // Asio's context takes over one reference, which it frees when it is destroyed.
    SSL_CTX_up_ref(native.get());
    try {
      ssl_context_ = std::make_shared<asio::ssl::context>(native.get());
    } catch (const std::exception& e) {
      SSL_CTX_free(native.get());
      spdlog::error("http: cannot use the TLS context: {}", e.what());
      return nullptr;
    }
    ssl_native_ = std::move(native);
  }
  return ssl_context_;
}

void Server::Impl::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  io_.stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  // No thread runs a handler now: close the listener and every connection directly, so that
  // peers see the end at once and the port is free. (The sessions themselves are destroyed
  // with the io_context's pending handlers.)
  error_code ignored;
  acceptor_.close(ignored);
  std::vector<std::shared_ptr<Session>> alive;
  {
    MutexLock l(&mu_);
    for (Session* s : sessions_) {
      if (auto p = s->weak_from_this().lock()) alive.push_back(std::move(p));
    }
  }
  for (const auto& session : alive) session->CloseNow();
}

// ---------------------------------------------------------------------------------------------

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

void Server::Stop() {
  if (impl_ != nullptr) impl_->Stop();
}

uint16_t Server::port() const { return impl_->port(); }

size_t Server::open_connections() const { return impl_->open_connections(); }

StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  if (!options.handler) return InvalidArgumentError("http: a server needs a handler");
  if (options.max_connections == 0 || options.max_connections_per_peer == 0 ||
      options.max_header_bytes == 0 || options.max_body_bytes == 0 || options.threads <= 0 ||
      options.request_timeout.count() <= 0 || options.idle_timeout.count() <= 0) {
    return InvalidArgumentError("http: limits, timeouts and threads must be positive");
  }
  try {
    auto impl = std::make_unique<Impl>(std::move(options));
    CAIRN_RETURN_IF_ERROR(impl->Listen());
    CAIRN_RETURN_IF_ERROR(impl->StartThreads());
    return std::unique_ptr<Server>(new Server(std::move(impl)));
  } catch (const std::exception& e) {
    return InternalError(std::string("http: cannot start the server: ") + e.what());
  }
}

namespace internal {

StatusOr<size_t> ParseRequest(std::string_view bytes, size_t max_header_bytes,
                              size_t max_body_bytes, Request* out) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(std::min<size_t>(max_header_bytes, UINT32_MAX)));
  parser.body_limit(max_body_bytes);
  parser.eager(true);
  size_t used = 0;
  while (!parser.is_done()) {
    error_code ec;
    const size_t n = parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == bhttp::error::need_more || (!ec && n == 0)) {
      // The session's buffer also bounds a head (bytes beyond the limit without its end).
      if (!parser.is_header_done() && bytes.size() > max_header_bytes) {
        return ResourceExhaustedError("request head over " + std::to_string(max_header_bytes) +
                                      " bytes");
      }
      return size_t{0};
    }
    if (ec) {
      const int status = StatusForReadError(ec);
      if (status == 431 || status == 413) return ResourceExhaustedError(ec.message());
      return InvalidArgumentError("malformed request: " + ec.message());
    }
  }
  *out = ToRequest(parser.release());
  return used;
}

}  // namespace internal

}  // namespace cairn::http
