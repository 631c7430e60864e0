#include "metrics/http_server.h"

namespace cairn::metrics {

namespace {

constexpr char kExpositionType[] = "text/plain; version=0.0.4; charset=utf-8";

http::Response MethodNotAllowed() {
  http::Response r = http::Response::Text(405, "method not allowed\n");
  r.headers.emplace_back("Allow", "GET, HEAD");
  return r;
}

}  // namespace

http::Response HandleMetricsRequest(const HttpServerOptions& options,
                                    const http::Request& request) {
  const bool read_method = request.method == "GET" || request.method == "HEAD";
  if (request.path == "/metrics") {
    if (!read_method) return MethodNotAllowed();
    if (request.peer.encrypted && options.metrics_need_client_certificate &&
        request.peer.principal.empty()) {
      return http::Response::Text(
          403, "/metrics needs a client certificate of the cluster's CA (docs/security.md)\n");
    }
    http::Response r = http::Response::Text(200, options.registry->ExposeText());
    r.content_type = kExpositionType;
    return r;
  }
  if (request.path == "/healthz") {
    if (!read_method) return MethodNotAllowed();
    if (!options.health) return http::Response::Text(200, "ok\n");
    auto [healthy, reason] = options.health();
    if (healthy) return http::Response::Text(200, "ok\n");
    return http::Response::Text(503, (reason.empty() ? "unhealthy" : reason) + "\n");
  }
  return http::Response::Text(404, "not found\n");
}

HttpServer::HttpServer(std::unique_ptr<http::Server> server) : server_(std::move(server)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() { server_->Stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options) {
  if (options.registry == nullptr) return InvalidArgumentError("metrics: no registry to serve");
  http::ServerOptions so;
  so.host = options.host;
  so.port = options.port;
  so.tls = options.tls;
  so.max_connections = options.max_connections;
  so.max_connections_per_peer = options.max_connections_per_peer;
  so.max_header_bytes = options.max_request_bytes;
  so.max_body_bytes = options.max_request_bytes;
  so.request_timeout = options.request_timeout;
  so.idle_timeout = options.idle_timeout;
  so.handler = [options](const http::Request& request) {
    return HandleMetricsRequest(options, request);
  };
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<http::Server> server, http::Server::Start(std::move(so)));
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(server)));
}

}  // namespace cairn::metrics
