#include "worker/peer_set.h"

namespace cairn::worker {

PeerSet::PeerSet(std::string self_id, ChannelFactory factory)
    : self_id_(std::move(self_id)), factory_(std::move(factory)) {}

void PeerSet::SetPeers(const std::map<std::string, std::string>& addresses) {
  std::map<std::string, Peer, std::less<>> next;
  std::map<std::string, Peer, std::less<>> dropped;  // Destroyed after the lock is released.
  MutexLock l(&mu_);
  for (const auto& [id, address] : addresses) {
    if (id == self_id_ || address.empty()) continue;
    Peer& peer = next[id];
    peer.address = address;
    auto it = peers_.find(id);
    if (it != peers_.end() && it->second.address == address) {
      peer.channel = std::move(it->second.channel);
    }
  }
  dropped.swap(peers_);
  peers_.swap(next);
}

std::shared_ptr<protocol::PageChannel> PeerSet::Get(std::string_view id) const {
  MutexLock l(&mu_);
  auto it = peers_.find(id);
  if (it == peers_.end()) return nullptr;
  if (it->second.channel == nullptr) it->second.channel = factory_(it->second.address);
  return it->second.channel;
}

size_t PeerSet::size() const {
  MutexLock l(&mu_);
  return peers_.size();
}

}  // namespace cairn::worker
