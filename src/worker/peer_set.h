// PeerSet: this worker's channels to the other workers of the cluster, by worker id, for peer
// fills (protocol flag PEER: copy a page from the replica that just cached it instead of reading
// the source again).
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

#include "common/thread_annotations.h"
#include "protocol/page_channel.h"

namespace cairn::worker {

class PeerSet {
 public:
  // Makes the channel to the worker at `address` ("host:port"). Must not return null.
  using ChannelFactory =
      std::function<std::shared_ptr<protocol::PageChannel>(const std::string& address)>;

  // `self_id`: this worker's id (never its own peer).
  PeerSet(std::string self_id, ChannelFactory factory);

  // Replaces the known workers (id -> address). Channels of workers whose address did not change
  // are kept; the others are dropped (a read in flight keeps its channel alive).
  void SetPeers(const std::map<std::string, std::string>& addresses) EXCLUDES(mu_);

  // The channel to worker `id`, made on first use; null if `id` is unknown or this worker.
  std::shared_ptr<protocol::PageChannel> Get(std::string_view id) const EXCLUDES(mu_);

  // Known peers (this worker excluded).
  size_t size() const EXCLUDES(mu_);

 private:
  struct Peer {
    std::string address;
    std::shared_ptr<protocol::PageChannel> channel;  // Null until first used.
  };

  const std::string self_id_;
  const ChannelFactory factory_;
  mutable Mutex mu_;
  mutable std::map<std::string, Peer, std::less<>> peers_ GUARDED_BY(mu_);
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_PEER_SET_H_
