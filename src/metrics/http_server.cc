#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <optional>
#include <string_view>
#include <system_error>

#include "metrics/http_request.h"

namespace cairn::metrics {

namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

constexpr int kListenBacklog = 128;
// After an error response, how long to drain what the client still sends before closing; closing
// with unread input makes the kernel send RST, which can destroy the response in flight.
constexpr std::chrono::milliseconds kLingerTime{500};
constexpr size_t kLingerBytes = 64 * 1024;

enum class Wait { kReady, kTimeout, kStopped, kError };

// Waits until `fd` has one of `events`, the deadline passes or the stop event fires.
Wait WaitFor(int fd, short events, int stop_fd, SteadyClock::time_point deadline) {
  for (;;) {
    const auto remaining =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (remaining.count() <= 0) return Wait::kTimeout;
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int ready =
        ::poll(fds, 2, static_cast<int>(std::min<int64_t>(remaining.count(), INT_MAX)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Wait::kError;
    }
    if (fds[1].revents != 0) return Wait::kStopped;
    // POLLERR/POLLHUP count as ready: the following recv/send reports what happened.
    if (fds[0].revents != 0) return Wait::kReady;
  }
}

enum class Read { kData, kEof, kTimeout, kStopped, kError };

// Appends what is available on `fd` (at most 16 KiB) to `buffer`, waiting until `deadline`.
Read ReadSome(int fd, int stop_fd, SteadyClock::time_point deadline, std::string* buffer) {
  char chunk[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      buffer->append(chunk, static_cast<size_t>(n));
      return Read::kData;
    }
    if (n == 0) return Read::kEof;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Read::kError;
    switch (WaitFor(fd, POLLIN, stop_fd, deadline)) {
      case Wait::kReady:
        continue;
      case Wait::kTimeout:
        return Read::kTimeout;
      case Wait::kStopped:
        return Read::kStopped;
      case Wait::kError:
        return Read::kError;
    }
  }
}

// Sends all of `data` before `deadline`; false if the peer, the deadline or Stop() intervened.
bool WriteAll(int fd, int stop_fd, SteadyClock::time_point deadline, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (WaitFor(fd, POLLOUT, stop_fd, deadline) != Wait::kReady) return false;
      continue;
    }
    return false;
  }
  return true;
}

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string extra_headers;  // Complete "Name: value\r\n" lines.
  bool close = false;         // Close the connection after this response whatever the client asked.
};

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
  }
  return "Unknown";
}

std::string Serialize(const Response& response, bool keep_alive, bool head_only) {
  std::string out = "HTTP/1.1 ";
  out += std::to_string(response.status);
  out += ' ';
  out += ReasonPhrase(response.status);
  out += "\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\nContent-Length: ";
  out += std::to_string(response.body.size());
  out += "\r\nCache-Control: no-store\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += response.extra_headers;
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

Response ErrorResponse(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  response.close = true;
  return response;
}

// Half-closes, then drains the client's remaining input for a short while so that the kernel
// delivers our last response instead of resetting the connection.
void LingeringClose(int fd, int stop_fd) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = SteadyClock::now() + kLingerTime;
  std::string sink;
  while (sink.size() < kLingerBytes && ReadSome(fd, stop_fd, deadline, &sink) == Read::kData) {
  }
}

// Resolves and binds a listening socket; returns the fd or the error.
StatusOr<int> Listen(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string bind_host = host.empty() ? "0.0.0.0" : host;
  const std::string service = std::to_string(port);
  addrinfo* results = nullptr;
  if (const int rc = ::getaddrinfo(bind_host.c_str(), service.c_str(), &hints, &results); rc != 0) {
    return InvalidArgumentError("metrics http: cannot resolve '" + bind_host +
                                "': " + ::gai_strerror(rc));
  }
  Status last_error = InvalidArgumentError("metrics http: no address for '" + bind_host + "'");
  int listen_fd = -1;
  for (addrinfo* ai = results; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    const int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = ErrnoToStatus(errno, "metrics http: socket");
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, kListenBacklog) != 0) {
      last_error = ErrnoToStatus(errno, "metrics http: bind " + bind_host + ":" + service);
      ::close(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(results);
  if (listen_fd < 0) return last_error;
  return listen_fd;
}

StatusOr<uint16_t> BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoToStatus(errno, "metrics http: getsockname");
  }
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return InternalError("metrics http: unexpected socket family");
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options) {
  if (options.registry == nullptr) return InvalidArgumentError("metrics http: registry is null");
  if (options.max_connections == 0 || options.max_request_bytes == 0 ||
      options.request_timeout.count() <= 0 || options.idle_timeout.count() <= 0) {
    return InvalidArgumentError("metrics http: limits and timeouts must be positive");
  }
  CAIRN_ASSIGN_OR_RETURN(const int listen_fd, Listen(options.host, options.port));
  StatusOr<uint16_t> port = BoundPort(listen_fd);
  if (!port.ok()) {
    ::close(listen_fd);
    return port.status();
  }
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    const Status error = ErrnoToStatus(errno, "metrics http: eventfd");
    ::close(listen_fd);
    return error;
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, listen_fd, stop_fd, *port));
  try {
    server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  } catch (const std::system_error& e) {
    return InternalError(std::string("metrics http: cannot start accept thread: ") + e.what());
  }
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, int listen_fd, int stop_fd, uint16_t port)
    : options_(std::move(options)), listen_fd_(listen_fd), stop_fd_(stop_fd), port_(port) {}

HttpServer::~HttpServer() {
  Stop();
  ::close(stop_fd_);
}

void HttpServer::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  const uint64_t one = 1;
  // Cannot fail in a way that matters: the counter only overflows after 2^64-1 writes.
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
  if (accept_thread_.joinable()) accept_thread_.join();
  // The accept thread is gone, so nothing adds connections any more.
  std::list<std::unique_ptr<Connection>> connections;
  {
    MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (const std::unique_ptr<Connection>& connection : connections) {
    if (connection->thread.joinable()) connection->thread.join();
  }
  ::close(listen_fd_);  // Frees the port for a successor.
}

size_t HttpServer::open_connections() const {
  MutexLock lock(&mu_);
  size_t open = 0;
  for (const std::unique_ptr<Connection>& connection : connections_) {
    if (!connection->done.load(std::memory_order_acquire)) ++open;
  }
  return open;
}

void HttpServer::ReapFinished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    MutexLock lock(&mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if ((*it)->done.load(std::memory_order_acquire)) {
        finished.splice(finished.end(), connections_, it);
      }
      it = next;
    }
  }
  for (const std::unique_ptr<Connection>& connection : finished) connection->thread.join();
}

void HttpServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
      spdlog::error("metrics http: poll on listening socket failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED ||
          errno == EPROTO) {
        continue;
      }
      // Out of descriptors or memory: the listening socket stays readable, so back off instead
      // of spinning, but keep watching for Stop().
      spdlog::warn("metrics http: accept failed: {}", std::strerror(errno));
      pollfd stop = {stop_fd_, POLLIN, 0};
      ::poll(&stop, 1, 100);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ReapFinished();

    MutexLock lock(&mu_);
    size_t live = 0;
    for (const auto& c : connections_) live += c->evicted.load() ? 0 : 1;
    if (live >= options_.max_connections && !EvictIdleLocked()) {
      // Best effort, without waiting: this thread must not block on a client.
      const std::string busy =
          Serialize(ErrorResponse(503, "too many connections\n"), false, false);
      [[maybe_unused]] const ssize_t n =
          ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->idle_since_us = SteadyMicros();  // Not "idle since forever" before it runs.
    Connection* raw = connection.get();
    try {
      raw->thread = std::thread([this, raw] { ServeConnection(raw); });
    } catch (const std::system_error& e) {
      spdlog::warn("metrics http: cannot start connection thread: {}", e.what());
      ::close(fd);
      continue;
    }
    connections_.push_back(std::move(connection));
  }
}

bool HttpServer::EvictIdleLocked() {
  Connection* victim = nullptr;
  for (const auto& c : connections_) {
    if (c->evicted.load() || c->done.load() || !c->idle.load()) continue;
    if (victim == nullptr || c->idle_since_us.load() < victim->idle_since_us.load()) {
      victim = c.get();
    }
  }
  if (victim == nullptr) return false;
  victim->evicted = true;
  MutexLock fd_lock(&victim->fd_mu);
  if (!victim->fd_closed) ::shutdown(victim->fd, SHUT_RDWR);  // Wakes its poll(); it exits.
  return true;
}

namespace {

Response Route(const HttpRequest& request, const HttpServerOptions& options) {
  const bool is_metrics = request.path == "/metrics";
  const bool is_health = request.path == "/healthz";
  if (!is_metrics && !is_health) {
    Response response;
    response.status = 404;
    response.body = "not found\n";
    return response;
  }
  if (request.method != "GET" && request.method != "HEAD") {
    Response response;
    response.status = 405;
    response.body = "method not allowed\n";
    response.extra_headers = "Allow: GET, HEAD\r\n";
    return response;
  }
  Response response;
  // The registry and the health callback are other people's code: nothing they throw may take
  // the server down.
  try {
    if (is_metrics) {
      response.content_type = "text/plain; version=0.0.4; charset=utf-8";
      response.body = options.registry->ExposeText();
    } else if (!options.health) {
      response.body = "ok\n";
    } else {
      auto [healthy, reason] = options.health();
      if (healthy) {
        response.body = "ok\n";
      } else {
        response.status = 503;
        response.body = reason.empty() ? "unhealthy" : std::move(reason);
        response.body.push_back('\n');
      }
    }
  } catch (const std::exception& e) {
    spdlog::error("metrics http: {} failed: {}", request.path, e.what());
    return ErrorResponse(500, "internal error\n");
  } catch (...) {
    spdlog::error("metrics http: {} failed with an unknown exception", request.path);
    return ErrorResponse(500, "internal error\n");
  }
  return response;
}

}  // namespace

void HttpServer::ServeConnection(Connection* connection) {
  const int fd = connection->fd;
  std::string in;
  // Sends `response` and says whether the connection may carry another request.
  auto respond = [&](const Response& response, bool keep_alive, bool head_only) {
    keep_alive = keep_alive && !response.close;
    const auto deadline = SteadyClock::now() + options_.request_timeout;
    if (!WriteAll(fd, stop_fd_, deadline, Serialize(response, keep_alive, head_only))) {
      return false;
    }
    if (!keep_alive) LingeringClose(fd, stop_fd_);
    return keep_alive;
  };

  for (bool open = true; open;) {
    // 1. The head: an idle connection may wait idle_timeout for its next request, but once a
    // request has begun it must be complete within request_timeout.
    const auto idle_deadline = SteadyClock::now() + options_.idle_timeout;
    std::optional<SteadyClock::time_point> request_deadline;
    if (!in.empty()) request_deadline = SteadyClock::now() + options_.request_timeout;
    if (in.empty()) {
      connection->idle_since_us = SteadyMicros();
      connection->idle = true;
    }
    HeadParse parse = ParseRequestHead(in, options_.max_request_bytes);
    while (parse.state == HeadParse::State::kIncomplete) {
      const Read read = ReadSome(fd, stop_fd_, request_deadline.value_or(idle_deadline), &in);
      if (read != Read::kData) {
        if (read == Read::kTimeout && !in.empty()) {
          respond(ErrorResponse(408, "request timeout\n"), false, false);
        }
        open = false;
        break;
      }
      connection->idle = false;
      if (!request_deadline) request_deadline = SteadyClock::now() + options_.request_timeout;
      parse = ParseRequestHead(in, options_.max_request_bytes);
    }
    connection->idle = false;
    if (!open) break;
    if (parse.state == HeadParse::State::kMalformed) {
      respond(ErrorResponse(400, "bad request: " + parse.error + "\n"), false, false);
      break;
    }
    if (parse.state == HeadParse::State::kTooLarge) {
      respond(ErrorResponse(431, "request head too large\n"), false, false);
      break;
    }
    const HttpRequest& request = parse.request;
    if (request.has_transfer_encoding) {
      respond(ErrorResponse(501, "request bodies with Transfer-Encoding are not supported\n"),
              false, false);
      break;
    }
    // 2. The body: no endpoint takes one, but it is read and dropped so a keep-alive connection
    // stays in step with the client.
    if (request.content_length > options_.max_request_bytes - parse.head_size) {
      respond(ErrorResponse(413, "request body too large\n"), false, false);
      break;
    }
    const size_t request_size = parse.head_size + request.content_length;
    while (open && in.size() < request_size) {
      open = ReadSome(fd, stop_fd_, *request_deadline, &in) == Read::kData;
    }
    if (!open) break;
    in.erase(0, request_size);

    // 3. The answer.
    open = respond(Route(request, options_), request.keep_alive, request.method == "HEAD");
  }
  connection->idle = false;
  {
    MutexLock fd_lock(&connection->fd_mu);
    ::close(fd);
    connection->fd_closed = true;
  }
  connection->done.store(true, std::memory_order_release);
}

}  // namespace cairn::metrics
