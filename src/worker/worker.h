// Worker: everything `cairn worker` runs, wired together — page store, mount table, page service,
// the TCP server and the HTTP metrics/health endpoint. `cairn up` runs the same object in process
// with the FUSE mount, serving the client through a LocalChannel instead of TCP.
//
// Thread-safety: Start/Stop from one thread; accessors are safe from any thread.
#ifndef CAIRN_WORKER_WORKER_H_
#define CAIRN_WORKER_WORKER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cairn/mount_spec.h"
#include "config/config.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"
#include "pagestore/page_store.h"
#include "worker/cluster_agent.h"
#include "worker/eviction_tracker.h"
#include "worker/page_rules.h"
#include "worker/local_channel.h"
#include "worker/page_service.h"
#include "worker/peer_pending.h"
#include "worker/peer_set.h"
#include "worker/request_authorizer.h"
#include "worker/server.h"
#include "worker/write_service.h"

namespace cairn::worker {

struct WorkerOptions {
  config::WorkerConfig config;
  std::vector<MountSpec> mounts;
  uint32_t page_size = 1 << 20;
  bool serve_tcp = true;  // False for the embedded worker of `cairn up`.
  // Cluster mode: etcd endpoints (comma-separated URLs). The mount table then comes from etcd
  // (`mounts` must be empty) and the worker registers itself there (see ClusterAgent).
  std::string etcd_endpoints;
  TlsSettings etcd_tls;                 // TLS to etcd (https endpoints); see membership::EtcdTls.
  std::string etcd_insecure_plaintext;  // See membership::EtcdOptions::insecure_plaintext.
  // "host:port" clients use to reach the page service; default: the listen address, with a
  // wildcard host replaced by this machine's host name.
  std::string advertise_address;
  std::chrono::seconds lease_ttl{5};
  // Cluster mode: copy a missing page from a replica that has it (a miss looks on the other
  // replicas; a copy request names the worker to copy from) instead of reading the source. Off:
  // every missing page comes from the source (for comparison and as a way out).
  bool peer_fill = true;
  // A sequential reader's miss reads up to this many bytes of the following pages in the same
  // source request (PageServiceOptions::source_read_bytes; `--source-read-size`).
  uint32_t source_read_bytes = 4 << 20;
  // TLS of the page service and of the connections to peers (the same certificate: node
  // certificates are both server and client). Not enabled: plaintext, allowed only on a
  // loopback listen address unless config.insecure_plaintext says why.
  TlsSettings tls;
  // Test seam: mounts over these under-storages instead of opening the specs' URIs.
  std::vector<std::shared_ptr<ufs::UnderStorage>> ufs_override;
};

class Worker {
 public:
  // Errors: InvalidArgument (bad options, mount table), PermissionDenied (unsafe or unwritable
  // cache folder), Unavailable (port in use).
  static StatusOr<std::unique_ptr<Worker>> Start(WorkerOptions options);
  ~Worker();

  PageService* service() { return service_.get(); }
  WriteService* writes() { return writes_.get(); }
  protocol::PageChannel* local_channel() { return local_channel_.get(); }
  metrics::Registry* registry() { return registry_.get(); }
  pagestore::PageStore* store() { return store_.get(); }
  uint16_t port() const { return server_ ? server_->port() : 0; }
  ServerStats server_stats() { return server_ ? server_->Stats() : ServerStats{}; }
  // Null for the embedded worker of `cairn up` (no network clients).
  RequestAuthorizer* authorizer() { return authorizer_.get(); }
  uint16_t metrics_port() const { return http_ ? http_->port() : 0; }
  const std::string& id() const { return id_; }
  // The address registered in etcd (cluster mode), else "".
  const std::string& advertised_address() const { return advertised_; }
  // Stops serving (idempotent); queued page writes finish first.
  void Stop();

 private:
  Worker() = default;
  Status Init(WorkerOptions options);
  void RegisterStoreMetrics();
  void RegisterLimiterMetrics();

  Status JoinCluster(const WorkerOptions& options);

  std::string id_;
  std::string advertised_;
  std::unique_ptr<metrics::Registry> registry_;
  // Before store_: the store's attribute resolver calls it until the store is gone.
  std::unique_ptr<PageRules> page_rules_;
  std::unique_ptr<EvictionTracker> eviction_tracker_;  // The store's eviction listener.
  std::unique_ptr<pagestore::PageStore> store_;
  // Cluster mode only: the other workers, for peer fills. Outlives the service that reads it.
  std::unique_ptr<PeerSet> peers_;
  // The other workers' files not yet uploaded, for the write service's rmdir and rename checks
  // (null without peers). Before writes_: it outlives the service that asks it.
  std::unique_ptr<PeerPending> peer_pending_;
  std::unique_ptr<PageService> service_;
  std::unique_ptr<WrittenPages> written_pages_;  // Outlives the write service that uses it.
  std::unique_ptr<WriteService> writes_;         // Outlives the server and channel that use it.
  std::unique_ptr<LocalChannel> local_channel_;
  std::unique_ptr<RequestAuthorizer> authorizer_;  // Outlives the server that uses it.
  std::unique_ptr<WorkerServer> server_;
  std::unique_ptr<metrics::HttpServer> http_;
  bool metrics_tls_ = false;                      // http_ serves HTTPS.
  std::string metrics_host_;                      // The host http_ is bound to.
  std::unique_ptr<ClusterAgent> cluster_;         // Cluster mode only.
  std::shared_ptr<ufs::UfsLimiter> ufs_limiter_;  // Worker-wide source cap, if configured.
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_WORKER_H_
