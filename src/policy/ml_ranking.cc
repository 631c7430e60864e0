#include "policy/ml_ranking.h"

namespace cairn::policy::internal {

void MlRanking::PushProtected(Slot* s, Group& g) {
  all_.PushBack(s);
  g.members.PushBack(s);
}

void MlRanking::PushVictimEnd(Slot* s, Group& g) {
  all_.PushFront(s);
  g.members.PushFront(s);
}

void MlRanking::Insert(Slot* s, bool cold) {
  Entry& e = s->second;
  Group& g = groups_[e.group];
  if (cold) {
    e.flags = kFlagCold;
    PushVictimEnd(s, g);
  } else if (g.thrashing && ++g.probation_inserts % kBimodalPeriod != 0) {
    e.flags = kFlagProbation;
    PushVictimEnd(s, g);
  } else {
    e.flags = 0;
    PushProtected(s, g);
  }
}

void MlRanking::Adopt(Slot* s) {
  Entry& e = s->second;
  Group& g = groups_[e.group];
  if (e.flags & (kFlagProbation | kFlagCold)) {
    PushVictimEnd(s, g);
  } else {
    PushProtected(s, g);
  }
}

void MlRanking::Access(Slot* s) {
  Entry& e = s->second;
  e.flags = kFlagHit;  // Also ends probation (promotion) and the cold state.
  all_.MoveToBack(s);
  groups_[e.group].members.MoveToBack(s);
}

void MlRanking::Remove(Slot* s, bool evicted) {
  Entry& e = s->second;
  all_.Erase(s);
  auto it = groups_.find(e.group);
  if (it == groups_.end()) return;  // Unreachable while the contract holds.
  Group& g = it->second;
  g.members.Erase(s);
  if (evicted && !(e.flags & kFlagCold)) RecordEviction(g, /*dead=*/!(e.flags & kFlagHit));
  // A group in probation mode keeps its state even with no entries left here: forgetting it would
  // let the next epoch flush the resident set again before the window refills.
  if (g.members.empty() && !g.thrashing) groups_.erase(it);
}

void MlRanking::RecordEviction(Group& g, bool dead) {
  if (g.recorded == kWindow) {
    if (g.dead[g.next]) --g.dead_count;
  } else {
    ++g.recorded;
  }
  g.dead[g.next] = dead;
  if (dead) ++g.dead_count;
  g.next = static_cast<uint16_t>((g.next + 1) % kWindow);
  if (g.recorded < kWindow) return;
  bool flip = g.thrashing ? g.dead_count < kExitDead : g.dead_count >= kEnterDead;
  if (!flip) return;
  g.thrashing = !g.thrashing;
  g.probation_inserts = 0;
  g.dead.reset();
  g.next = g.recorded = g.dead_count = 0;
}

Slot* MlRanking::Victim(const VictimFilter* may_evict) const {
  return all_.FirstAllowed(may_evict);
}

Slot* MlRanking::GroupVictim(uint32_t group, const VictimFilter* may_evict) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? nullptr : it->second.members.FirstAllowed(may_evict);
}

bool MlRanking::Thrashing(uint32_t group) const {
  auto it = groups_.find(group);
  return it != groups_.end() && it->second.thrashing;
}

}  // namespace cairn::policy::internal
