// Internal to the policy module: the two single-list rankings.
//
//   LRU  ("lru"):  evicts the least recently inserted-or-accessed entry; an access moves the entry
//                  to the protected end.
//   FIFO ("fifo"): evicts in insertion order; accesses change nothing, so a hot entry leaves as
//                  early as a cold one (cheap and scan-neutral; no state change on a hit).
//
// Both: a cold insert goes to the victim end (the latest cold insert is evicted first, as in
// LruPolicy); a re-insert of a tracked id is a remove plus a fresh insert (done by the engine).
// All operations O(1), victim search O(1 + entries rejected by the filter). Per entry: nothing
// beyond the engine's record. Per group: one hash map node with a 16-byte list head.
#ifndef CAIRN_POLICY_LIST_RANKING_H_
#define CAIRN_POLICY_LIST_RANKING_H_

#include <unordered_map>

#include "policy/ranking.h"

namespace cairn::policy::internal {

class ListRanking final : public Ranking {
 public:
  // `reorder_on_access`: true for LRU, false for FIFO.
  explicit ListRanking(bool reorder_on_access) : reorder_on_access_(reorder_on_access) {}

  void Insert(Slot* s, bool cold) override;
  void Adopt(Slot* s) override;
  void Access(Slot* s) override;
  void Remove(Slot* s, bool evicted) override;
  Slot* Victim(const VictimFilter* may_evict) const override;
  Slot* GroupVictim(uint32_t group, const VictimFilter* may_evict) const override;

 private:
  using GroupList = SlotList<&Entry::group_order>;

  const bool reorder_on_access_;
  SlotList<&Entry::order> all_;
  std::unordered_map<uint32_t, GroupList> groups_;  // No empty lists: erased when they empty.
};

}  // namespace cairn::policy::internal

#endif  // CAIRN_POLICY_LIST_RANKING_H_
