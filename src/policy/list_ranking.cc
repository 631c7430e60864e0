#include "policy/list_ranking.h"

namespace cairn::policy::internal {

void ListRanking::Insert(Slot* s, bool cold) {
  GroupList& group = groups_[s->second.group];
  if (cold) {
    all_.PushFront(s);
    group.PushFront(s);
  } else {
    all_.PushBack(s);
    group.PushBack(s);
  }
}

void ListRanking::Adopt(Slot* s) { Insert(s, /*cold=*/false); }

void ListRanking::Access(Slot* s) {
  if (!reorder_on_access_) return;
  all_.MoveToBack(s);
  groups_[s->second.group].MoveToBack(s);
}

void ListRanking::Remove(Slot* s, bool evicted) {
  all_.Erase(s);
  auto it = groups_.find(s->second.group);
  if (it == groups_.end()) return;  // Unreachable while the contract holds.
  it->second.Erase(s);
  if (it->second.empty()) groups_.erase(it);
}

Slot* ListRanking::Victim(const VictimFilter* may_evict) const {
  return all_.FirstAllowed(may_evict);
}

Slot* ListRanking::GroupVictim(uint32_t group, const VictimFilter* may_evict) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? nullptr : it->second.FirstAllowed(may_evict);
}

}  // namespace cairn::policy::internal
