#include "cli/client_metrics.h"

#include <spdlog/spdlog.h>

#include "net/stream.h"

namespace cairn::cli {

StatusOr<std::unique_ptr<ClientMetricsServer>> ClientMetricsServer::Start(
    Client* client, const std::string& listen, const std::string& plaintext_reason) {
  std::unique_ptr<ClientMetricsServer> server(new ClientMetricsServer());
  server->registry_ = std::make_unique<metrics::Registry>();
  metrics::Registry* r = server->registry_.get();
  auto add = [&](const char* name, const char* help, metrics::MetricType type,
                 uint64_t ClientStats::*field) {
    r->AddCallback(name, help, type,
                   [client, field] { return static_cast<double>(client->Stats().*field); });
  };
  using metrics::MetricType;
  add("cairn_client_page_reads_total", "Page requests sent to workers", MetricType::kCounter,
      &ClientStats::page_reads);
  add("cairn_client_page_read_failures_total",
      "Worker page requests that failed (the read went to the next worker or the source)",
      MetricType::kCounter, &ClientStats::page_read_failures);
  add("cairn_client_fallback_bytes_total", "Bytes read from the source directly",
      MetricType::kCounter, &ClientStats::fallback_bytes);
  add("cairn_client_checksum_failures_total", "Pages that failed end-to-end verification",
      MetricType::kCounter, &ClientStats::checksum_failures);
  add("cairn_client_short_circuit_reads_total",
      "Page reads served from a local worker's page files", MetricType::kCounter,
      &ClientStats::short_circuit_reads);
  add("cairn_client_buffer_hits_total", "Reads served from the client page buffer",
      MetricType::kCounter, &ClientStats::buffer_hits);
  add("cairn_client_unbuffered_reads_total",
      "One-page objects read whole straight into the reader's memory (not the page buffer)",
      MetricType::kCounter, &ClientStats::unbuffered_reads);
  add("cairn_client_ring_updates_total", "Worker-set changes applied", MetricType::kCounter,
      &ClientStats::ring_updates);
  add("cairn_client_mount_table_updates_total", "Mount tables applied (cluster mode)",
      MetricType::kCounter, &ClientStats::mount_table_updates);
  add("cairn_client_workers", "Workers in the client's ring", MetricType::kGauge,
      &ClientStats::workers);
  r->AddCallback("cairn_etcd_connected", "1 while etcd answers (cluster mode), else 0",
                 MetricType::kGauge,
                 [client] { return client->Stats().etcd_connected ? 1.0 : 0.0; });
  metrics::HttpServerOptions ho;
  uint16_t port = 0;
  CAIRN_RETURN_IF_ERROR(
      net::ParseHostPort(listen, &ho.host, &port).WithContext("--metrics-listen"));
  if (!net::IsLoopbackHost(ho.host)) {
    if (plaintext_reason.empty()) {
      return InvalidArgumentError(
          "--metrics-listen " + listen +
          " would serve the client's metrics in plaintext beyond this machine: listen on a "
          "loopback address, or state why with --metrics-insecure-plaintext REASON");
    }
    spdlog::warn("serving the client's /metrics in plaintext on {} ({})", listen, plaintext_reason);
  }
  ho.port = port;
  ho.registry = r;
  CAIRN_ASSIGN_OR_RETURN(server->http_, metrics::HttpServer::Start(ho));
  return server;
}

ClientMetricsServer::~ClientMetricsServer() {
  if (http_) http_->Stop();
}

}  // namespace cairn::cli
