#include "policy/lfu_ranking.h"

#include <algorithm>
#include <bit>

namespace cairn::policy::internal {
namespace {

// The count an entry with count `c` has after one aging step.
int Aged(int c) { return c < 2 ? c : c / 2; }

}  // namespace

template <Link Entry::*kLink>
void LfuRanking::Levels<kLink>::Add(int level, Slot* s, bool at_front) {
  if (at_front) {
    lists[level].PushFront(s);
  } else {
    lists[level].PushBack(s);
  }
  nonempty[level / 64] |= uint64_t{1} << (level % 64);
  ++entries;
}

template <Link Entry::*kLink>
void LfuRanking::Levels<kLink>::Erase(int level, Slot* s) {
  lists[level].Erase(s);
  if (lists[level].empty()) nonempty[level / 64] &= ~(uint64_t{1} << (level % 64));
  --entries;
}

template <Link Entry::*kLink>
Slot* LfuRanking::Levels<kLink>::FirstAllowed(const VictimFilter* may_evict) const {
  for (int word = 0; word < kLevels / 64; ++word) {
    for (uint64_t bits = nonempty[word]; bits != 0; bits &= bits - 1) {
      int level = word * 64 + std::countr_zero(bits);
      if (Slot* s = lists[level].FirstAllowed(may_evict)) return s;
    }
  }
  return nullptr;
}

template <Link Entry::*kLink>
void LfuRanking::Levels<kLink>::Halve() {
  // Ascending order matters: when list c moves onto c/2, the former contents of c/2 (c/2 >= 2)
  // have already moved further down, so c/2 then holds only entries that had counts 2(c/2) and
  // 2(c/2)+1, lower count first.
  for (int c = 2; c < kLevels; ++c) {
    if (lists[c].empty()) continue;
    int to = Aged(c);
    lists[to].Append(lists[c]);
  }
  nonempty = {};
  for (int c = 0; c < kLevels; ++c) {
    if (!lists[c].empty()) nonempty[c / 64] |= uint64_t{1} << (c % 64);
  }
}

uint8_t LfuRanking::CurrentFrequency(Entry& e) const {
  int f = e.frequency;
  // At most 8 halvings take any count to 1, so the loop is bounded whatever the epoch gap.
  for (uint32_t gap = epoch_ - e.epoch; gap > 0 && f >= 2; --gap) f = Aged(f);
  e.frequency = static_cast<uint8_t>(f);
  e.epoch = epoch_;
  return e.frequency;
}

void LfuRanking::Place(Slot* s, int level, bool at_front) {
  all_.Add(level, s, at_front);
  std::unique_ptr<GroupLevels>& group = groups_[s->second.group];
  if (group == nullptr) group = std::make_unique<GroupLevels>();
  group->Add(level, s, at_front);
}

void LfuRanking::Unplace(Slot* s, int level) {
  all_.Erase(level, s);
  auto it = groups_.find(s->second.group);
  if (it == groups_.end()) return;  // Unreachable while the contract holds.
  it->second->Erase(level, s);
  if (it->second->entries == 0) groups_.erase(it);
}

void LfuRanking::InitState(Entry& e, bool cold) const {
  e.epoch = epoch_;
  e.frequency = cold ? 0 : 1;
}

void LfuRanking::Insert(Slot* s, bool cold) {
  Entry& e = s->second;
  InitState(e, cold);
  Place(s, e.frequency, /*at_front=*/cold);
  Tick();
}

void LfuRanking::Adopt(Slot* s) {
  // Remove() in the previous ranking left the count up to date; only the epoch is ours now.
  Entry& e = s->second;
  e.epoch = epoch_;
  Place(s, e.frequency, /*at_front=*/false);
}

void LfuRanking::Access(Slot* s) {
  Entry& e = s->second;
  int from = CurrentFrequency(e);
  int to = std::min(from + 1, kLevels - 1);
  Unplace(s, from);
  e.frequency = static_cast<uint8_t>(to);
  Place(s, to, /*at_front=*/false);
  Tick();
}

void LfuRanking::Remove(Slot* s, bool evicted) { Unplace(s, CurrentFrequency(s->second)); }

Slot* LfuRanking::Victim(const VictimFilter* may_evict) const {
  return all_.FirstAllowed(may_evict);
}

Slot* LfuRanking::GroupVictim(uint32_t group, const VictimFilter* may_evict) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? nullptr : it->second->FirstAllowed(may_evict);
}

void LfuRanking::Tick() {
  uint64_t period = std::max(options_.lfu_aging_min_ops, options_.lfu_aging_ops_per_entry *
                                                             static_cast<uint64_t>(all_.entries));
  if (++ops_since_aging_ < period) return;
  ops_since_aging_ = 0;
  ++epoch_;
  all_.Halve();
  for (auto& [group, levels] : groups_) levels->Halve();
}

}  // namespace cairn::policy::internal
