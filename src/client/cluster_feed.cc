#include "client/cluster_feed.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "client/client_impl.h"
#include "membership/etcd_coordination.h"
#include "membership/mount_store.h"
#include "membership/worker_nodes.h"

namespace cairn::client {

namespace {
constexpr std::string_view kInvalidationsPrefix = "/cairn/v1/invalidations/";
}  // namespace

StatusOr<std::unique_ptr<ClusterFeed>> ClusterFeed::Start(
    const std::string& endpoints, const TlsSettings& tls, const std::string& insecure_plaintext,
    ClientImpl* client, std::chrono::milliseconds first_sync_timeout) {
  membership::EtcdOptions eo;
  eo.endpoints = endpoints;
  eo.tls = {tls.ca_file, tls.cert_file, tls.key_file};
  eo.insecure_plaintext = insecure_plaintext;
  CAIRN_ASSIGN_OR_RETURN(auto etcd, membership::EtcdCoordination::Create(eo));
  std::unique_ptr<ClusterFeed> feed(new ClusterFeed());
  feed->owned_coordination_ = std::move(etcd);
  CAIRN_RETURN_IF_ERROR(feed->Init(feed->owned_coordination_.get(), client, first_sync_timeout)
                            .WithContext("etcd at " + endpoints));
  return feed;
}

StatusOr<std::unique_ptr<ClusterFeed>> ClusterFeed::StartWith(
    membership::Coordination* coordination, ClientImpl* client,
    std::chrono::milliseconds first_sync_timeout) {
  std::unique_ptr<ClusterFeed> feed(new ClusterFeed());
  CAIRN_RETURN_IF_ERROR(feed->Init(coordination, client, first_sync_timeout));
  return feed;
}

Status ClusterFeed::Init(membership::Coordination* coordination, ClientImpl* client,
                         std::chrono::milliseconds first_sync_timeout) {
  auto deadline = std::chrono::steady_clock::now() + first_sync_timeout;
  workers_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kWorkersPrefix),
      [client](const membership::PrefixMirror::Snapshot& snapshot) {
        std::vector<placement::WorkerNode> nodes = membership::WorkerNodesFromSnapshot(snapshot);
        size_t n = nodes.size();
        Status s = client->SetWorkers(std::move(nodes));
        if (s.ok()) {
          spdlog::debug("workers changed: {} in the ring", n);
        } else {
          spdlog::warn("ignoring a worker set: {}", s.ToString());
        }
      });
  mounts_ = membership::PrefixMirror::Start(
      coordination, std::string(membership::kMountTableKey),
      [client](const membership::PrefixMirror::Snapshot& snapshot) {
        auto specs = membership::ParseMountTableSnapshot(snapshot);
        Status s = specs.ok() ? client->SetMounts(std::move(specs).value()) : specs.status();
        if (s.ok()) {
          spdlog::debug("mount table changed");
        } else {
          spdlog::warn("ignoring a mount table from etcd: {}", s.ToString());
        }
      });
  coordination_ = coordination;
  invalidations_ = membership::PrefixMirror::Start(
      coordination, std::string(kInvalidationsPrefix),
      [this, client](const membership::PrefixMirror::Snapshot& snapshot) {
        for (const auto& [key, value] : snapshot) {
          if (!seen_invalidations_.insert(key).second) continue;
          // Entries older than this client need nothing: it had no metadata then.
          if (!invalidations_synced_) continue;
          try {
            auto j = nlohmann::json::parse(value);
            std::string path = j.at("path").get<std::string>();
            client->InvalidateMetadata(path);
            spdlog::info("metadata of {} invalidated (cairn invalidate)", path);
          } catch (const std::exception& e) {
            spdlog::warn("ignoring invalidation {}: {}", key, e.what());
          }
        }
        invalidations_synced_ = true;
        // Forget keys whose lease expired, so the set stays small.
        for (auto it = seen_invalidations_.begin(); it != seen_invalidations_.end();) {
          it = snapshot.count(*it) ? std::next(it) : seen_invalidations_.erase(it);
        }
      });
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  if (!workers_->WaitForSync(left()) || !mounts_->WaitForSync(left())) {
    return UnavailableError("no answer from etcd within " +
                            std::to_string(first_sync_timeout.count()) + " ms");
  }
  return Status::Ok();
}

Status ClusterFeed::PublishInvalidation(const std::string& path) {
  if (coordination_ == nullptr) return InternalError("feed not started");
  CAIRN_ASSIGN_OR_RETURN(int64_t lease, coordination_->GrantLease(std::chrono::minutes(10)));
  std::random_device rd;
  char id[33];
  std::snprintf(id, sizeof(id), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  nlohmann::json j = {{"path", path},
                      {"time_unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()}};
  return coordination_->Put(std::string(kInvalidationsPrefix) + id, j.dump(), lease).status();
}

ClusterFeed::~ClusterFeed() {
  invalidations_.reset();
  mounts_.reset();
  workers_.reset();
}

bool ClusterFeed::connected() const {
  return workers_ != nullptr && mounts_ != nullptr && workers_->connected() && mounts_->connected();
}

}  // namespace cairn::client
