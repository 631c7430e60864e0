#include "worker/cluster_agent.h"

#include <spdlog/spdlog.h>

#include "membership/etcd_coordination.h"
#include "membership/mount_store.h"
#include "mount/mount_table.h"

namespace cairn::worker {

StatusOr<std::unique_ptr<ClusterAgent>> ClusterAgent::Start(
    ClusterAgentOptions options, PageService* service, metrics::Registry* registry,
    membership::Coordination* coordination) {
  std::unique_ptr<ClusterAgent> agent(new ClusterAgent());
  if (coordination == nullptr) {
    membership::EtcdOptions eo;
    eo.endpoints = options.etcd_endpoints;
    CAIRN_ASSIGN_OR_RETURN(agent->owned_coordination_,
                           membership::EtcdCoordination::Create(eo));
    coordination = agent->owned_coordination_.get();
  }
  ClusterAgent* self = agent.get();
  agent->mounts_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kMountTableKey),
      [self, service](const membership::PrefixMirror::Snapshot& snapshot) {
        auto specs = membership::ParseMountTableSnapshot(snapshot);
        if (!specs.ok()) {
          spdlog::warn("ignoring a mount table from etcd: {}", specs.status().ToString());
          return;
        }
        size_t n = specs->size();
        auto table = mount::MountTable::Create(std::move(specs).value());
        if (!table.ok()) {
          spdlog::warn("ignoring a mount table from etcd: {}", table.status().ToString());
          return;
        }
        service->SetMountTable(std::move(table).value());
        self->mount_table_updates_.fetch_add(1, std::memory_order_relaxed);
        spdlog::info("mount table from etcd: {} mount(s)", n);
      });
  if (!agent->mounts_->WaitForSync(options.first_sync_timeout)) {
    return UnavailableError("no answer from etcd at " + options.etcd_endpoints + " within " +
                            std::to_string(options.first_sync_timeout.count()) + " ms");
  }
  membership::WorkerRegistryOptions ro;
  ro.ttl = options.lease_ttl;
  CAIRN_ASSIGN_OR_RETURN(agent->registry_, membership::WorkerRegistry::Start(
                                               coordination, options.record, ro));
  // Registration goes on in the background; wait briefly so a healthy start is registered
  // when Start returns (scripts then see the worker in `cairn status` at once).
  if (!agent->registry_->WaitRegistered(options.first_sync_timeout)) {
    spdlog::warn("worker {} not registered in etcd yet; retrying in the background",
                 options.record.id);
  }
  registry->AddCallback("cairn_etcd_connected", "1 while etcd answers, else 0",
                        metrics::MetricType::kGauge,
                        [self] { return self->connected() ? 1.0 : 0.0; });
  registry->AddCallback("cairn_worker_registered",
                        "1 while this worker's record is in etcd (it is in the ring)",
                        metrics::MetricType::kGauge,
                        [self] { return self->registered() ? 1.0 : 0.0; });
  registry->AddCallback("cairn_mount_table_updates_total",
                        "Mount tables received from etcd and applied",
                        metrics::MetricType::kCounter, [self] {
                          return static_cast<double>(self->mount_table_updates_.load());
                        });
  return agent;
}

ClusterAgent::~ClusterAgent() { Stop(); }

void ClusterAgent::Stop() {
  if (registry_) registry_->Stop();
  mounts_.reset();
}

}  // namespace cairn::worker
