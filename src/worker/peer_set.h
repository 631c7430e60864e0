// PeerSet: this worker's view of the cluster's workers: the placement ring (the same one clients
// build from the same etcd records, so both agree on a page's replicas) and a channel to each
// other worker, by id, for replica lookups and peer fills (copy a page from a replica that has
// it instead of reading the source again).
//
// The set follows membership (ClusterAgent feeds it the worker records from etcd). Peers are
// looked up by id only: a request names a worker id, never an address, so a client cannot make
// a worker connect to an arbitrary host. A channel is made on first use and kept while the
// peer's address stays the same.
//
// Thread-safety: thread-safe.
#ifndef CAIRN_WORKER_PEER_SET_H_
#define CAIRN_WORKER_PEER_SET_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "placement/ring.h"
#include "protocol/page_channel.h"

namespace cairn::worker {

class PeerSet {
 public:
  // Makes the channel to the worker at `address` ("host:port"). Must not return null.
  using ChannelFactory =
      std::function<std::shared_ptr<protocol::PageChannel>(const std::string& address)>;

  // `self_id`: this worker's id (never its own peer).
  PeerSet(std::string self_id, ChannelFactory factory);

  // Replaces the cluster's workers (this one included when etcd lists it). Channels of workers
  // whose address did not change are kept; the others are dropped (a read in flight keeps its
  // channel alive). A node without an address is in the ring but is no peer. InvalidArgument
  // for a list the ring refuses (empty or duplicate id, bad weight): the previous set stays.
  Status SetWorkers(std::vector<placement::WorkerNode> nodes) EXCLUDES(mu_);

  // The channel to worker `id`, made on first use; null if `id` is unknown or this worker.
  std::shared_ptr<protocol::PageChannel> Get(std::string_view id) const EXCLUDES(mu_);

  // The ids of the first `n` workers the ring names for `key_hash` (a page's replicas, in the
  // order clients prefer them), this worker included if it is one. Empty before SetWorkers.
  std::vector<std::string> Replicas(uint64_t key_hash, size_t n) const EXCLUDES(mu_);

  // The worker that owns namespace path `path` (writes and metadata go to it: the first the
  // ring names for Hash64(path), as clients pick it): its channel, or null when it is this
  // worker. Unavailable before SetWorkers, or when the owner has no address.
  StatusOr<std::shared_ptr<protocol::PageChannel>> OwnerOf(const std::string& path) const
      EXCLUDES(mu_);

  const std::string& self_id() const { return self_id_; }
  // Known peers (this worker excluded).
  size_t size() const EXCLUDES(mu_);
  // Their ids, sorted.
  std::vector<std::string> PeerIds() const EXCLUDES(mu_);

 private:
  struct Peer {
    std::string address;
    std::shared_ptr<protocol::PageChannel> channel;  // Null until first used.
  };

  const std::string self_id_;
  const ChannelFactory factory_;
  mutable Mutex mu_;
  std::shared_ptr<const placement::Ring> ring_ GUARDED_BY(mu_);
  mutable std::map<std::string, Peer, std::less<>> peers_ GUARDED_BY(mu_);
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_PEER_SET_H_
