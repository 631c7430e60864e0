// ClusterAgent: a worker's link to etcd (cluster mode).
//
// It registers the worker (membership::WorkerRegistry: a record under a lease, kept alive,
// re-registered after a lost lease, deleted at once on a clean stop) and mirrors the mount table
// into the PageService, so a mount added with `cairn mount add` is served without a restart. It
// also mirrors the cache-management rules (/cairn/v1/rules) into PageRules and the page store
// (re-attributing cached pages: pins, priorities, TTLs, groups) and sets each mount's per-worker
// quota share (the mount's quota / the number of workers in the ring), and keeps the PeerSet
// (the other workers, for peer fills) up to date.
// While etcd is unreachable the worker keeps serving with the last known mount table; the state
// shows in the metrics cairn_etcd_connected, cairn_worker_registered and
// cairn_mount_table_updates_total, and in the log (once per outage).
//
// Thread-safety: Start/Stop from one thread; the mirror's callback runs on its own thread.
#ifndef CAIRN_WORKER_CLUSTER_AGENT_H_
#define CAIRN_WORKER_CLUSTER_AGENT_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "common/status.h"
#include "membership/coordination.h"
#include "membership/etcd_coordination.h"
#include "membership/prefix_mirror.h"
#include "membership/records.h"
#include "membership/worker_registry.h"
#include "mount/source_allow_list.h"
#include "metrics/registry.h"
#include "ufs/ufs_limiter.h"
#include "common/thread_annotations.h"
#include "pagestore/page_store.h"
#include "worker/page_rules.h"
#include "worker/page_service.h"
#include "worker/peer_set.h"
#include "worker/request_authorizer.h"

namespace cairn::worker {

struct ClusterAgentOptions {
  std::string etcd_endpoints;  // Comma-separated URLs.
  membership::EtcdTls etcd_tls;
  std::string etcd_insecure_plaintext;
  membership::WorkerRecord record;
  std::chrono::seconds lease_ttl{5};
  // Worker-wide source caps applied to every mount from etcd.
  std::vector<std::shared_ptr<ufs::UfsLimiter>> ufs_limiters;
  // How long Start waits for the first read of the mount table (Unavailable after it).
  std::chrono::milliseconds first_sync_timeout{10000};
  // Fed with the other workers' ids and addresses for peer fills. Not owned; may be null.
  PeerSet* peers = nullptr;
  // Given the authorization policy in etcd on every change (a document that does not decode
  // denies everything but cluster members until it is fixed). Not owned; may be null.
  RequestAuthorizer* authorizer = nullptr;
  // Mounts from etcd whose source this list refuses are not served (logged at error level,
  // counted by cairn_worker_mounts_refused); the others are.
  mount::SourceAllowList allowed_sources;
};

class ClusterAgent {
 public:
  // Reads the mount table (waiting up to first_sync_timeout), then registers the worker. The
  // service and registry are not owned and must outlive the agent. `coordination` may be null
  // (then one is made for options.etcd_endpoints) or a test's (not owned).
  // Errors: Unavailable (etcd did not answer in time), InvalidArgument (bad endpoints, record,
  // or a mount table in etcd that does not validate).
  static StatusOr<std::unique_ptr<ClusterAgent>> Start(ClusterAgentOptions options,
                                                       PageService* service, PageRules* rules,
                                                       pagestore::PageStore* store,
                                                       metrics::Registry* registry,
                                                       membership::Coordination* coordination);
  ~ClusterAgent();

  // Deregisters (the worker leaves the ring at once) and stops watching. Idempotent.
  void Stop();

  bool connected() const { return mounts_ != nullptr && mounts_->connected(); }
  bool registered() const { return registry_ != nullptr && registry_->registered(); }

 private:
  ClusterAgent() = default;

  // Recomputes every mount's per-worker quota share and re-attributes cached pages.
  void ApplyPolicy() EXCLUDES(mu_);

  PageService* service_ = nullptr;
  PageRules* rules_ = nullptr;
  pagestore::PageStore* store_ = nullptr;
  std::unique_ptr<membership::Coordination> owned_coordination_;
  std::unique_ptr<membership::PrefixMirror> mounts_;
  std::unique_ptr<membership::PrefixMirror> rules_mirror_;
  std::unique_ptr<membership::PrefixMirror> acl_mirror_;
  std::unique_ptr<membership::PrefixMirror> workers_mirror_;
  std::unique_ptr<membership::WorkerRegistry> registry_;
  std::atomic<uint64_t> mount_table_updates_{0};
  std::atomic<uint64_t> rules_updates_{0};
  std::atomic<uint64_t> acl_updates_{0};
  std::atomic<uint64_t> mounts_refused_{0};  // In the latest mount table.
  std::atomic<size_t> worker_count_{1};      // Never 0: the quota share's divisor.
  std::atomic<size_t> ring_workers_{0};      // Records in the latest worker list (a gauge).
  Mutex mu_;  // Serialises ApplyPolicy (called from three mirror threads).
  std::set<uint32_t> quota_groups_ GUARDED_BY(mu_);  // Groups given a quota last time.
  metrics::Registry* metrics_ = nullptr;
  std::set<std::string> gauge_mounts_ GUARDED_BY(mu_);  // Mounts with a cached-bytes gauge.
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_CLUSTER_AGENT_H_
