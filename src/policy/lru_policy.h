// LruPolicy: evicts the least recently inserted-or-accessed entry. Every operation is O(1)
// (a doubly linked list in recency order plus a hash map from id to list node), except
// PickVictim with a filter, which is O(entries skipped).
//
// MakeEvictionPolicy("lru") returns a PolicyEngine with the same victim order (plus priorities,
// pinning, TTLs and quotas); this class stays as the minimal standalone LRU for code that wants
// nothing else, and as the reference the policy tests compare against.
//
// Memory: about 100 bytes per tracked entry (list node + hash map node).
// Thread-safety: none (see EvictionPolicy).
#ifndef CAIRN_POLICY_LRU_POLICY_H_
#define CAIRN_POLICY_LRU_POLICY_H_

#include <list>
#include <unordered_map>

#include "policy/eviction_policy.h"

namespace cairn::policy {

class LruPolicy final : public EvictionPolicy {
 public:
  LruPolicy() = default;

  std::string_view name() const override { return "lru"; }
  size_t size() const override { return index_.size(); }
  uint64_t tracked_bytes() const override { return bytes_; }

 private:
  struct Entry {
    Hash128 id;
    uint64_t bytes = 0;
  };
  // Front: most recently used. Back: next victim.
  using List = std::list<Entry>;

  void DoInsert(const Hash128& id, uint64_t bytes, const EntryHints& hints) override;
  void DoAccess(const Hash128& id) override;
  void DoRemove(const Hash128& id) override;
  std::optional<Hash128> DoPickVictim(const VictimFilter* may_evict) override;
  void DoReserve(size_t entries) override { index_.reserve(entries); }

  List order_;
  std::unordered_map<Hash128, List::iterator, Hash128Hasher> index_;
  uint64_t bytes_ = 0;
};

}  // namespace cairn::policy

#endif  // CAIRN_POLICY_LRU_POLICY_H_
