// HttpServer: a small HTTP/1.1 endpoint for Prometheus scrapes and health probes.
//
//   GET|HEAD /metrics  200, "text/plain; version=0.0.4; charset=utf-8", Registry::ExposeText()
//   GET|HEAD /healthz  200 "ok\n", or 503 "<reason>\n" when the health callback says unhealthy
//   other methods on those paths: 405; any other path: 404
//   malformed request: 400 and close; head over max_request_bytes: 431 and close; body over it:
//   413 and close; Transfer-Encoding bodies: 501 and close.
//
// At max_connections, a new connection closes the connection that has waited longest without a
// request in progress (a silent connection, or a keep-alive one between requests) to make room:
// idle connections cannot lock scrapes and health probes out (a request that arrives on the
// chosen connection at that instant is lost with it; the client sees a reset). Only when every
// connection is in the middle of a request (bounded by request_timeout) is the new one answered
// 503 and closed.
//
// One accept thread plus one thread per connection (at most max_connections). Keep-alive and
// pipelining work. A slow client cannot pin a thread: a request must arrive whole within
// request_timeout of its first byte, an idle keep-alive connection is closed after idle_timeout,
// and a response must drain within request_timeout. Sockets are non-blocking and every wait also
// watches a stop event, so Stop() returns promptly whatever the clients do.
//
// It is an operator endpoint (a scrape every few seconds), not a data path: simplicity wins
// over throughput. No exception escapes it: failures of the Registry or the health callback
// answer 500.
#ifndef CAIRN_METRICS_HTTP_SERVER_H_
#define CAIRN_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "metrics/registry.h"

namespace cairn::metrics {

struct HttpServerOptions {
  // Address to bind: a numeric IPv4/IPv6 address or a host name; "0.0.0.0" (or "") for all IPv4
  // interfaces, "::" for all IPv6 (and, where the OS maps them, IPv4) interfaces.
  std::string host = "0.0.0.0";
  // TCP port; 0 picks an ephemeral port (read it back with HttpServer::port()).
  uint16_t port = 0;
  // Required; not owned; must outlive the server.
  Registry* registry = nullptr;
  // Optional; {true, ""} when healthy, else {false, reason}. Called on the connection's thread for
  // every /healthz request, concurrently if several probes arrive at once: must be thread-safe and
  // must outlive the server. Unset means always healthy.
  std::function<std::pair<bool, std::string>()> health;
  size_t max_connections = 64;
  // Bound on a request's head, and on head plus body.
  size_t max_request_bytes = 16 * 1024;
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
};

class HttpServer {
 public:
  // Binds, listens and starts serving.
  // Errors: InvalidArgument for a null registry, zero limits or timeouts, or a host that does not
  // resolve; the errno-derived status (IoError, PermissionDenied, ...) when the socket cannot be
  // created or bound (e.g. port in use); Internal if a thread cannot be started.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Stops (see Stop()).
  ~HttpServer();

  // Stops accepting, closes every connection (in-flight responses are cut off) and joins all
  // threads. Idempotent; thread-safe; must not be called from the health callback or a Registry
  // callback (it would wait for its own thread).
  void Stop();

  // The bound port (the real one when options.port was 0). Thread-safe.
  uint16_t port() const { return port_; }

  // Number of currently open client connections (for tests and a gauge). Thread-safe.
  size_t open_connections() const;

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};
    // Waiting for the first byte of a request, since `idle_since_us` (steady clock).
    std::atomic<bool> idle{true};
    std::atomic<int64_t> idle_since_us{0};
    std::atomic<bool> evicted{false};
    // Guards closing `fd` against a concurrent eviction's shutdown() of a reused descriptor.
    Mutex fd_mu;
    bool fd_closed GUARDED_BY(fd_mu) = false;
  };

  HttpServer(HttpServerOptions options, int listen_fd, int stop_fd, uint16_t port);

  void AcceptLoop();
  void ServeConnection(Connection* connection);
  // Joins and frees connections whose threads have finished.
  void ReapFinished() EXCLUDES(mu_);
  // At the cap: closes the longest-idle connection; false if every one is busy.
  bool EvictIdleLocked() REQUIRES(mu_);

  const HttpServerOptions options_;
  const int listen_fd_;
  // An eventfd that becomes (and stays) readable when Stop() begins; every poll() watches it.
  const int stop_fd_;
  const uint16_t port_;
  std::thread accept_thread_;

  mutable Mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_ GUARDED_BY(mu_);
  Mutex stop_mu_;  // Serialises Stop() so a second caller also waits for the joins.
  bool stopped_ GUARDED_BY(stop_mu_) = false;
};

}  // namespace cairn::metrics

#endif  // CAIRN_METRICS_HTTP_SERVER_H_
