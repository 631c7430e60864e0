// ClusterAgent: a worker's link to etcd (cluster mode).
//
// It registers the worker (membership::WorkerRegistry: a record under a lease, kept alive,
// re-registered after a lost lease, deleted at once on a clean stop) and mirrors the mount table
// into the PageService, so a mount added with `cairn mount add` is served without a restart.
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
#include <string>

#include "common/status.h"
#include "membership/coordination.h"
#include "membership/prefix_mirror.h"
#include "membership/records.h"
#include "membership/worker_registry.h"
#include "metrics/registry.h"
#include "worker/page_service.h"

namespace cairn::worker {

struct ClusterAgentOptions {
  std::string etcd_endpoints;  // Comma-separated URLs.
  membership::WorkerRecord record;
  std::chrono::seconds lease_ttl{5};
  // How long Start waits for the first read of the mount table (Unavailable after it).
  std::chrono::milliseconds first_sync_timeout{10000};
};

class ClusterAgent {
 public:
  // Reads the mount table (waiting up to first_sync_timeout), then registers the worker. The
  // service and registry are not owned and must outlive the agent. `coordination` may be null
  // (then one is made for options.etcd_endpoints) or a test's (not owned).
  // Errors: Unavailable (etcd did not answer in time), InvalidArgument (bad endpoints, record,
  // or a mount table in etcd that does not validate).
  static StatusOr<std::unique_ptr<ClusterAgent>> Start(ClusterAgentOptions options,
                                                       PageService* service,
                                                       metrics::Registry* registry,
                                                       membership::Coordination* coordination);
  ~ClusterAgent();

  // Deregisters (the worker leaves the ring at once) and stops watching. Idempotent.
  void Stop();

  bool connected() const { return mounts_ != nullptr && mounts_->connected(); }
  bool registered() const { return registry_ != nullptr && registry_->registered(); }

 private:
  ClusterAgent() = default;

  std::unique_ptr<membership::Coordination> owned_coordination_;
  std::unique_ptr<membership::PrefixMirror> mounts_;
  std::unique_ptr<membership::WorkerRegistry> registry_;
  std::atomic<uint64_t> mount_table_updates_{0};
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_CLUSTER_AGENT_H_
