#include "worker/peer_set.h"

#include "common/checksum.h"

namespace cairn::worker {

PeerSet::PeerSet(std::string self_id, ChannelFactory factory)
    : self_id_(std::move(self_id)), factory_(std::move(factory)) {}

Status PeerSet::SetWorkers(std::vector<placement::WorkerNode> nodes) {
  CAIRN_ASSIGN_OR_RETURN(placement::Ring ring, placement::Ring::Create(std::move(nodes)));
  auto shared_ring = std::make_shared<const placement::Ring>(std::move(ring));
  std::map<std::string, Peer, std::less<>> next;
  std::map<std::string, Peer, std::less<>> dropped;  // Destroyed after the lock is released.
  MutexLock l(&mu_);
  for (const placement::WorkerNode& node : shared_ring->nodes()) {
    if (node.id == self_id_ || node.address.empty()) continue;
    Peer& peer = next[node.id];
    peer.address = node.address;
    auto it = peers_.find(node.id);
    if (it != peers_.end() && it->second.address == node.address) {
      peer.channel = std::move(it->second.channel);
    }
  }
  dropped.swap(peers_);
  peers_.swap(next);
  ring_ = std::move(shared_ring);
  return Status::Ok();
}

std::shared_ptr<protocol::PageChannel> PeerSet::Get(std::string_view id) const {
  MutexLock l(&mu_);
  auto it = peers_.find(id);
  if (it == peers_.end()) return nullptr;
  if (it->second.channel == nullptr) it->second.channel = factory_(it->second.address);
  return it->second.channel;
}

std::vector<std::string> PeerSet::Replicas(uint64_t key_hash, size_t n) const {
  std::shared_ptr<const placement::Ring> ring;
  {
    MutexLock l(&mu_);
    ring = ring_;
  }
  std::vector<std::string> ids;
  if (ring == nullptr || ring->empty()) return ids;
  for (const placement::WorkerNode* node : ring->Candidates(key_hash, n)) ids.push_back(node->id);
  return ids;
}

StatusOr<std::shared_ptr<protocol::PageChannel>> PeerSet::OwnerOf(const std::string& path) const {
  std::vector<std::string> owner = Replicas(Hash64(path), 1);
  if (owner.empty()) return UnavailableError("this worker knows no workers yet");
  if (owner.front() == self_id_) return std::shared_ptr<protocol::PageChannel>();
  std::shared_ptr<protocol::PageChannel> channel = Get(owner.front());
  if (channel == nullptr) return UnavailableError("worker " + owner.front() + " has no address");
  return channel;
}

size_t PeerSet::size() const {
  MutexLock l(&mu_);
  return peers_.size();
}

std::vector<std::string> PeerSet::PeerIds() const {
  MutexLock l(&mu_);
  std::vector<std::string> ids;
  ids.reserve(peers_.size());
  for (const auto& [id, peer] : peers_) ids.push_back(id);
  return ids;
}

}  // namespace cairn::worker
