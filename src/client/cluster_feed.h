// ClusterFeed: keeps a client's worker set and mount table in step with etcd (cluster mode).
//
// It mirrors two things (membership::PrefixMirror: list, then watch, re-list after any gap):
// the worker records under /cairn/v1/workers/ and the mount table document at /cairn/v1/mounts
// (docs/etcd-layout.md). Every change rebuilds the client's ring or mount table; a record that
// does not parse is skipped with a warning (one bad writer cannot take the cluster down). While
// etcd is unreachable the last known ring and table stay in use and the mirrors reconnect on
// their own; `connected()` reports it.
//
// Thread-safety: thread-safe. The watch callbacks run on the mirrors' threads.
#ifndef CAIRN_CLIENT_CLUSTER_FEED_H_
#define CAIRN_CLIENT_CLUSTER_FEED_H_

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cairn/client.h"
#include "common/status.h"
#include "membership/coordination.h"
#include "membership/prefix_mirror.h"
#include "membership/records.h"
#include "placement/ring.h"

namespace cairn::client {

class ClientImpl;

class ClusterFeed {
 public:
  // Connects to etcd (`endpoints`: comma-separated URLs) and waits up to `first_sync_timeout`
  // for the first read of both the workers and the mount table, applying them to `client` (not
  // owned; must outlive the feed). Unavailable if etcd did not answer in time; InvalidArgument
  // for bad endpoints (plaintext beyond loopback without `insecure_plaintext`, a reason).
  static StatusOr<std::unique_ptr<ClusterFeed>> Start(const std::string& endpoints,
                                                      const TlsSettings& tls,
                                                      const std::string& insecure_plaintext,
                                                      ClientImpl* client,
                                                      std::chrono::milliseconds first_sync_timeout);
  // For tests: over an existing coordination service (not owned; must outlive the feed).
  static StatusOr<std::unique_ptr<ClusterFeed>> StartWith(
      membership::Coordination* coordination, ClientImpl* client,
      std::chrono::milliseconds first_sync_timeout);
  ~ClusterFeed();

  // Whether both mirrors heard from etcd recently.
  bool connected() const;

  // Tells every client to drop its cached metadata of `path` (and below): writes
  // /cairn/v1/invalidations/<random id> (JSON {"path", "time_unix_ms"}) under a 10-minute lease;
  // every feed watches that prefix and invalidates each new entry once. Unavailable if etcd is
  // unreachable.
  Status PublishInvalidation(const std::string& path);

 private:
  ClusterFeed() = default;
  Status Init(membership::Coordination* coordination, ClientImpl* client,
              std::chrono::milliseconds first_sync_timeout);

  std::unique_ptr<membership::Coordination> owned_coordination_;
  // Destroyed before owned_coordination_ (declared after it).
  std::unique_ptr<membership::PrefixMirror> workers_;
  std::unique_ptr<membership::PrefixMirror> mounts_;
  std::unique_ptr<membership::PrefixMirror> invalidations_;
  membership::Coordination* coordination_ = nullptr;
  // Invalidation keys already applied (only touched by the invalidations mirror's thread).
  std::set<std::string> seen_invalidations_;
  bool invalidations_synced_ = false;
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_CLUSTER_FEED_H_
