#include "worker/cluster_agent.h"
#include "worker/source_caches.h"

#include <map>

#include <spdlog/spdlog.h>

#include "membership/acl_store.h"
#include "membership/etcd_coordination.h"
#include "membership/mount_store.h"
#include "membership/rule_store.h"
#include "membership/worker_nodes.h"
#include "mount/mount_table.h"

namespace cairn::worker {

StatusOr<std::unique_ptr<ClusterAgent>> ClusterAgent::Start(
    ClusterAgentOptions options, PageService* service, PageRules* rules,
    pagestore::PageStore* store, metrics::Registry* registry,
    membership::Coordination* coordination) {
  std::unique_ptr<ClusterAgent> agent(new ClusterAgent());
  agent->service_ = service;
  agent->rules_ = rules;
  agent->store_ = store;
  agent->metrics_ = registry;
  if (coordination == nullptr) {
    membership::EtcdOptions eo;
    eo.endpoints = options.etcd_endpoints;
    eo.tls = options.etcd_tls;
    eo.insecure_plaintext = options.etcd_insecure_plaintext;
    CAIRN_ASSIGN_OR_RETURN(agent->owned_coordination_, membership::EtcdCoordination::Create(eo));
    coordination = agent->owned_coordination_.get();
  }
  ClusterAgent* self = agent.get();
  agent->mounts_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kMountTableKey),
      [self, service, limiters = options.ufs_limiters,
       allowed = options.allowed_sources](const membership::PrefixMirror::Snapshot& snapshot) {
        auto specs = membership::ParseMountTableSnapshot(snapshot);
        if (!specs.ok()) {
          spdlog::warn("ignoring a mount table from etcd: {}", specs.status().ToString());
          return;
        }
        // This worker's own limits, whatever etcd says: a refused mount is left out (clients
        // asking for it are told it is unknown here, and read its source themselves).
        uint64_t refused = 0;
        std::erase_if(*specs, [&](const MountSpec& spec) {
          Status s = allowed.Check(spec);
          if (s.ok()) return false;
          ++refused;
          spdlog::error("not serving mount {} from etcd: {}", spec.path, s.message());
          return true;
        });
        self->mounts_refused_.store(refused);
        size_t n = specs->size();
        auto table = mount::MountTable::Create(std::move(specs).value(), limiters,
                                               SourceCaches(self->metrics_));
        if (!table.ok()) {
          spdlog::warn("ignoring a mount table from etcd: {}", table.status().ToString());
          return;
        }
        self->rules_->SetMounts(*table);
        service->SetMountTable(std::move(table).value());
        self->mount_table_updates_.fetch_add(1, std::memory_order_relaxed);
        spdlog::info("mount table from etcd: {} mount(s)", n);
        self->ApplyPolicy();
      });
  agent->rules_mirror_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kRulesKey),
      [self](const membership::PrefixMirror::Snapshot& snapshot) {
        auto parsed = membership::ParseRulesSnapshot(snapshot);
        auto rules = parsed.ok() ? policy::PathRules::Create(std::move(parsed).value())
                                 : StatusOr<policy::PathRules>(parsed.status());
        if (!rules.ok()) {
          spdlog::warn("ignoring rules from etcd: {}", rules.status().ToString());
          return;
        }
        spdlog::info("cache rules from etcd: {} rule(s)", rules->rules().size());
        self->rules_->SetRules(std::make_shared<const policy::PathRules>(std::move(rules).value()));
        self->rules_updates_.fetch_add(1, std::memory_order_relaxed);
        self->ApplyPolicy();
      });
  agent->acl_mirror_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kAclKey),
      [self, authorizer = options.authorizer](const membership::PrefixMirror::Snapshot& snapshot) {
        if (authorizer == nullptr) return;
        StatusOr<auth::Policy> policy = membership::ParseAclSnapshot(snapshot);
        if (!policy.ok()) {
          // Fail closed: whatever the broken document meant to allow, allow nothing.
          spdlog::error(
              "authorization policy in etcd does not decode ({}): denying every "
              "request but cluster members' until it is fixed (cairn acl ls)",
              policy.status().ToString());
          authorizer->SetPolicy(auth::Policy{.enabled = true, .grants = {}});
        } else {
          spdlog::info("authorization policy from etcd: {}, {} grant(s)",
                       policy->enabled ? "enabled" : "disabled", policy->grants.size());
          authorizer->SetPolicy(std::move(policy).value());
        }
        self->acl_updates_.fetch_add(1, std::memory_order_relaxed);
      });
  agent->workers_mirror_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kWorkersPrefix),
      [self, peers = options.peers](const membership::PrefixMirror::Snapshot& snapshot) {
        if (peers != nullptr) {
          Status s = peers->SetWorkers(membership::WorkerNodesFromSnapshot(snapshot));
          if (!s.ok()) spdlog::warn("worker list from etcd not applied: {}", s.ToString());
        }
        size_t n = std::max<size_t>(1, snapshot.size());
        if (self->worker_count_.exchange(n) != n) self->ApplyPolicy();
        // After the quota shares of this ring are applied: a worker that shows the ring has
        // split its quotas for it (tests wait for this gauge).
        self->ring_workers_.store(snapshot.size(), std::memory_order_relaxed);
      });
  if (!agent->mounts_->WaitForSync(options.first_sync_timeout) ||
      !agent->rules_mirror_->WaitForSync(options.first_sync_timeout) ||
      !agent->acl_mirror_->WaitForSync(options.first_sync_timeout)) {
    return UnavailableError("no answer from etcd at " + options.etcd_endpoints + " within " +
                            std::to_string(options.first_sync_timeout.count()) + " ms");
  }
  membership::WorkerRegistryOptions ro;
  ro.ttl = options.lease_ttl;
  CAIRN_ASSIGN_OR_RETURN(agent->registry_,
                         membership::WorkerRegistry::Start(coordination, options.record, ro));
  // Registration goes on in the background; wait briefly so a healthy start is registered
  // when Start returns (scripts then see the worker in `cairn status` at once).
  if (!agent->registry_->WaitRegistered(options.first_sync_timeout)) {
    spdlog::warn("worker {} not registered in etcd yet; retrying in the background",
                 options.record.id);
  }
  registry->AddCallback("cairn_etcd_connected", "1 while etcd answers, else 0",
                        metrics::MetricType::kGauge,
                        [self] { return self->connected() ? 1.0 : 0.0; });
  registry->AddCallback(
      "cairn_worker_registered", "1 while this worker's record is in etcd (it is in the ring)",
      metrics::MetricType::kGauge, [self] { return self->registered() ? 1.0 : 0.0; });
  registry->AddCallback(
      "cairn_worker_ring_workers",
      "Workers in this worker's latest view of the ring (its own record included); equal on "
      "every worker and client once membership has settled",
      metrics::MetricType::kGauge,
      [self] { return static_cast<double>(self->ring_workers_.load(std::memory_order_relaxed)); });
  registry->AddCallback("cairn_worker_mounts_refused",
                        "Mounts of the latest mount table from etcd that this worker does not "
                        "serve: their source is outside its --allow-source/--allow-endpoint lists",
                        metrics::MetricType::kGauge,
                        [self] { return static_cast<double>(self->mounts_refused_.load()); });
  registry->AddCallback("cairn_acl_updates_total",
                        "Authorization policies received from etcd and applied",
                        metrics::MetricType::kCounter,
                        [self] { return static_cast<double>(self->acl_updates_.load()); });
  registry->AddCallback("cairn_rules_updates_total",
                        "Cache-management rule sets received from etcd and applied",
                        metrics::MetricType::kCounter,
                        [self] { return static_cast<double>(self->rules_updates_.load()); });
  registry->AddCallback("cairn_mount_table_updates_total",
                        "Mount tables received from etcd and applied",
                        metrics::MetricType::kCounter,
                        [self] { return static_cast<double>(self->mount_table_updates_.load()); });
  return agent;
}

ClusterAgent::~ClusterAgent() { Stop(); }

void ClusterAgent::Stop() {
  if (registry_) registry_->Stop();
  workers_mirror_.reset();
  acl_mirror_.reset();
  rules_mirror_.reset();
  mounts_.reset();
}

void ClusterAgent::ApplyPolicy() {
  MutexLock l(&mu_);
  std::shared_ptr<const policy::PathRules> rules = rules_->rules();
  std::shared_ptr<const mount::MountTable> mounts = service_->mount_table();
  std::set<uint32_t> groups;
  size_t workers = worker_count_.load();
  for (const auto& m : mounts->mounts()) {
    uint64_t quota = rules->QuotaOf(m->spec.path);
    if (quota == 0) continue;
    uint32_t group = MountGroup(m->spec.path);
    // Best effort: pages spread evenly over the ring, so each worker holds its 1/N share.
    store_->SetGroupQuota(group, std::max<uint64_t>(1, quota / workers));
    groups.insert(group);
  }
  for (uint32_t old : quota_groups_) {
    if (!groups.count(old)) store_->SetGroupQuota(old, 0);
  }
  quota_groups_ = std::move(groups);
  ExportMountGauges(metrics_, store_, *mounts, &gauge_mounts_);
  store_->Reattribute();
}

}  // namespace cairn::worker
