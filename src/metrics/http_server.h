// HttpServer: the operator endpoint of a Cairn process, on http::Server (Boost.Beast), plaintext
// or TLS.
//
//   GET|HEAD /metrics  200, "text/plain; version=0.0.4; charset=utf-8", Registry::ExposeText();
//                      403 over TLS without a verified client certificate when
//                      metrics_need_client_certificate (Prometheus: tls_config cert_file/key_file)
//   GET|HEAD /healthz  200 "ok\n", or 503 "<reason>\n" when the health callback says unhealthy;
//                      open to any client that can connect (kubelet probes send no certificate)
//   other methods on those paths: 405; any other path: 404
//
// Limits, timeouts, the connection caps (idle connections cannot lock probes out) and the
// answers for malformed requests are http::Server's (http/server.h). No exception escapes:
// failures of the Registry or the health callback answer 500.
#ifndef CAIRN_METRICS_HTTP_SERVER_H_
#define CAIRN_METRICS_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"
#include "http/server.h"
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
  // Optional; {true, ""} when healthy, else {false, reason}. Called on an I/O thread for every
  // /healthz request, concurrently if several probes arrive at once: must be thread-safe and
  // must outlive the server. Unset means always healthy.
  std::function<std::pair<bool, std::string>()> health;
  // Optional: serve HTTPS only (a server context; a client certificate is asked for, and
  // verified when sent, only if the context does not require one).
  std::shared_ptr<tls::TlsContext> tls;
  bool metrics_need_client_certificate = true;  // Over TLS only.
  size_t max_connections = 64;
  size_t max_connections_per_peer = 16;
  // Bound on a request's head, and on its body.
  size_t max_request_bytes = 16 * 1024;
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
};

class HttpServer {
 public:
  // Binds, listens and starts serving. Errors: InvalidArgument for a null registry, and as
  // http::Server::Start (bad limits, an address that does not resolve, port in use: IoError).
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  // Stops accepting, closes every connection and joins the threads. Idempotent; must not be
  // called from the health callback or a Registry callback.
  void Stop();

  uint16_t port() const { return server_->port(); }
  size_t open_connections() const { return server_->open_connections(); }

 private:
  explicit HttpServer(std::unique_ptr<http::Server> server);
  std::unique_ptr<http::Server> server_;
};

// The routing above, as a pure function of the request (for tests).
http::Response HandleMetricsRequest(const HttpServerOptions& options, const http::Request& request);

}  // namespace cairn::metrics

#endif  // CAIRN_METRICS_HTTP_SERVER_H_
