// Prometheus metrics of a client process (`cairn fuse --metrics-listen`): what the client library
// counts (worker reads, failovers, source fallbacks, checksum failures, ring and mount-table
// updates, etcd connectivity), served with /healthz by a metrics::HttpServer.
#ifndef CAIRN_CLI_CLIENT_METRICS_H_
#define CAIRN_CLI_CLIENT_METRICS_H_

#include <memory>
#include <string>

#include "cairn/client.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"

namespace cairn::cli {

class ClientMetricsServer {
 public:
  // Serves the metrics of `client` (not owned; must outlive the server) at `listen`
  // ("host:port"), in plaintext: on a loopback address, or elsewhere for the stated
  // `plaintext_reason` (InvalidArgument without one). Errors as metrics::HttpServer::Start
  // (port in use, bad address).
  static StatusOr<std::unique_ptr<ClientMetricsServer>> Start(Client* client,
                                                              const std::string& listen,
                                                              const std::string& plaintext_reason);
  ~ClientMetricsServer();
  uint16_t port() const { return http_->port(); }

 private:
  ClientMetricsServer() = default;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<metrics::HttpServer> http_;
};

}  // namespace cairn::cli

#endif  // CAIRN_CLI_CLIENT_METRICS_H_
