#include "policy/lru_policy.h"

namespace cairn::policy {

void LruPolicy::DoInsert(const Hash128& id, uint64_t bytes, const EntryHints& hints) {
  auto [it, inserted] = index_.try_emplace(id);
  if (inserted) {
    order_.push_front(Entry{id, bytes});
    it->second = order_.begin();
  } else {
    bytes_ -= it->second->bytes;
    it->second->bytes = bytes;
  }
  bytes_ += bytes;
  // splice moves the node without reallocating, so the iterator in the map stays valid.
  if (hints.cold) {
    order_.splice(order_.end(), order_, it->second);
  } else {
    order_.splice(order_.begin(), order_, it->second);
  }
}

void LruPolicy::DoAccess(const Hash128& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  order_.splice(order_.begin(), order_, it->second);
}

void LruPolicy::DoRemove(const Hash128& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  bytes_ -= it->second->bytes;
  order_.erase(it->second);
  index_.erase(it);
}

std::optional<Hash128> LruPolicy::DoPickVictim(const VictimFilter* may_evict) {
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    if (may_evict == nullptr || (*may_evict)(it->id)) return it->id;
  }
  return std::nullopt;
}

}  // namespace cairn::policy
