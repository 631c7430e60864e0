// Internal to the policy module: the "ml" ranking, LRU plus adaptive insertion per group, for
// training jobs that read datasets larger than the cache in shuffled epochs.
//
// Why: when a dataset of D pages is read in a new random order every epoch through a cache of
// C < D pages, each page comes back about one epoch (D reads) later, after more than C other
// misses, so LRU evicts every page just before its reuse (hit ratio 0-15 % at C = D/2). Keeping
// any fixed C pages instead hits C/D of the reads (Qureshi et al., ISCA 2007, "Adaptive insertion
// policies for high performance caching": BIP keeps part of a thrashing working set resident).
//
// Rule (constants in docs/policies.md, with the reasoning):
//   * Each group keeps a window of its last kWindow = 256 evictions (RemoveReason::kEvicted) and
//     how many were dead: evicted with no hit since insert. Evictions of cold entries that were
//     never used (pages found at startup) are not recorded: they say nothing about the workload.
//   * Normal mode: inserts go to the protected (MRU) end, as in LRU. When the window is full and
//     >= kEnterDead = 231 of 256 (90 %) were dead, the group is thrashing: switch to probation
//     mode and clear the window.
//   * Probation mode: inserts go to the victim end, flagged as probation, except every 32nd
//     (bimodal, BIP's epsilon = 1/32), which goes to the MRU end so the resident set can still
//     change slowly. A probation entry that gets a hit is promoted (to the MRU end, flag cleared).
//     Other groups still insert normally, and their misses evict probation entries first. When
//     the window is full and < kExitDead = 128 of 256 (50 %) were dead, the group switches back
//     to normal mode and the window is cleared.
//   * Accesses, cold inserts and victim choice are LRU's.
//
// Per entry: nothing beyond the engine's record (flags). Per group: ~100 bytes (list head, the
// 256-bit window, counters); kept while the group has entries here or is in probation mode.
#ifndef CAIRN_POLICY_ML_RANKING_H_
#define CAIRN_POLICY_ML_RANKING_H_

#include <bitset>
#include <unordered_map>

#include "policy/ranking.h"

namespace cairn::policy::internal {

class MlRanking final : public Ranking {
 public:
  static constexpr int kWindow = 256;
  static constexpr int kEnterDead = 231;  // ceil(0.9 x 256)
  static constexpr int kExitDead = 128;   // 0.5 x 256
  static constexpr uint32_t kBimodalPeriod = 32;

  MlRanking() = default;

  void InitState(Entry& e, bool cold) const override { e.flags = cold ? kFlagCold : 0; }
  void Insert(Slot* s, bool cold) override;
  void Adopt(Slot* s) override;
  void Access(Slot* s) override;
  void Remove(Slot* s, bool evicted) override;
  Slot* Victim(const VictimFilter* may_evict) const override;
  Slot* GroupVictim(uint32_t group, const VictimFilter* may_evict) const override;
  bool Thrashing(uint32_t group) const override;

 private:
  struct Group {
    SlotList<&Entry::group_order> members;
    std::bitset<kWindow> dead;  // Ring buffer of the last `recorded` evictions.
    uint16_t next = 0;          // Ring position of the next record.
    uint16_t recorded = 0;      // Records in the window, up to kWindow.
    uint16_t dead_count = 0;
    bool thrashing = false;
    uint32_t probation_inserts = 0;  // Inserts since entering probation mode (bimodal counter).
  };

  void PushProtected(Slot* s, Group& g);
  void PushVictimEnd(Slot* s, Group& g);
  static void RecordEviction(Group& g, bool dead);

  SlotList<&Entry::order> all_;
  std::unordered_map<uint32_t, Group> groups_;
};

}  // namespace cairn::policy::internal

#endif  // CAIRN_POLICY_ML_RANKING_H_
