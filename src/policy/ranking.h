// Internal to the policy module: a Ranking orders the evictable entries of one priority class of
// a PolicyEngine. It is the "base policy" of the engine (LRU, FIFO, LFU or ML); the engine adds
// priorities, pinning, TTLs and quotas around it and owns the entries (see entry_list.h).
//
// Every ranking keeps two orders over the same entries, kept consistent by construction: one over
// all its entries (PickVictim) and one per group (the victim for a group over its quota). The
// per-group order is exactly the global order restricted to that group, so "the group's victim"
// is the entry of that group that PickVictim with a "group == g" filter would return, found in
// O(1) instead of by skipping every other group's entries.
//
// Contract for all methods: `s` belongs to the engine's map; Insert/Adopt only for an entry not in
// this ranking, Access/Remove only for one in it. Rankings never allocate per entry (only per
// group) and never read clocks. Thread-safety: none (serialized by the engine).
#ifndef CAIRN_POLICY_RANKING_H_
#define CAIRN_POLICY_RANKING_H_

#include <cstdint>
#include <memory>

#include "policy/entry_list.h"
#include "policy/eviction_policy.h"

namespace cairn::policy::internal {

class Ranking {
 public:
  virtual ~Ranking() = default;

  // Starts ranking a newly inserted entry (its `group` is set). `cold`: rank it below every entry
  // that was inserted or accessed normally (see EntryHints::cold).
  virtual void Insert(Slot* s, bool cold) = 0;

  // Sets the per-entry state a fresh insert gets (what Insert does before linking), for an entry
  // inserted pinned: if it is unpinned later, Adopt then ranks it like a fresh insert.
  virtual void InitState(Entry& e, bool cold) const {}

  // Starts ranking an entry that another ranking of the same kind held until now (PolicyEngine's
  // Update moved it to another class or group). Keeps what the kind learned about it (frequency,
  // probation), and ranks it as if just used within that state.
  virtual void Adopt(Slot* s) = 0;

  // Records a use.
  virtual void Access(Slot* s) = 0;

  // Stops ranking `s`. `evicted`: it was removed to make room (RemoveReason::kEvicted); rankings
  // that learn from evictions look at it, the others ignore it.
  virtual void Remove(Slot* s, bool evicted) = 0;

  // The next victim among all entries / among the entries of `group`, skipping those `may_evict`
  // (if not null) rejects; null if none. No state change. O(1) plus O(entries rejected).
  virtual Slot* Victim(const VictimFilter* may_evict) const = 0;
  virtual Slot* GroupVictim(uint32_t group, const VictimFilter* may_evict) const = 0;

  // Whether `group` is in the ML ranking's probation mode (always false for other kinds).
  virtual bool Thrashing(uint32_t group) const { return false; }

 protected:
  Ranking() = default;
};

// Tunables that tests shrink so that aging shows up in a short hand-computed trace.
struct RankingOptions {
  // LfuRanking halves every frequency once per max(lfu_aging_min_ops, lfu_aging_ops_per_entry x
  // entries) inserts plus accesses (see lfu_ranking.h).
  uint64_t lfu_aging_min_ops = 1024;
  uint64_t lfu_aging_ops_per_entry = 8;
};

enum class RankingKind : uint8_t { kLru, kLfu, kFifo, kMl };

// A new, empty ranking of `kind`.
std::unique_ptr<Ranking> MakeRanking(RankingKind kind, const RankingOptions& options);

}  // namespace cairn::policy::internal

#endif  // CAIRN_POLICY_RANKING_H_
