// PolicyEngine: the eviction policy the page store uses. A base ranking (LRU, LFU, FIFO or the
// ML-aware one, chosen by name) plus the cache-management rules that do not depend on the ranking:
//
//   * Priority classes. One ranking per class; PickVictim takes every evictable kLow entry before
//     any kNormal one and every kNormal one before any kHigh one, whatever their recency.
//   * Pinning. Pinned entries are in no ranking at all, so they are never victims and a large
//     pinned dataset costs PickVictim nothing.
//   * TTLs. Entries with a deadline sit in an ordered index; TakeExpired hands out those whose
//     deadline has passed, earliest first. Pinning does not protect from expiry.
//   * Group quotas. A group (dataset, mount) may have a byte quota; PickVictimForInsert takes the
//     victim from the inserting group while that group would exceed it.
//   * Update re-attributes a tracked entry (class, pinning, TTL, group) when rules change.
//
// Like every EvictionPolicy it is pure bookkeeping: no I/O, no clock (deadlines come in and "now"
// comes in), no threads, no locks. Counting evictions per reason and deciding how much room is
// needed stay with the caller. Rules and memory: docs/policies.md.
//
// Costs: insert, access, remove, Update without TTL change: O(1) expected (hash map + lists);
// with a TTL: + O(log t) for the t entries that have one; PickVictim / PickVictimForInsert: O(1)
// plus the entries the filter rejects (pinned entries are never seen, so keep the filter for
// entries in use). Memory: ~104 bytes per entry (one 96-byte hash-map node of id + 64-byte record,
// plus 8 bytes of bucket array); + ~64 bytes per entry with a TTL; per group and class a few
// dozen bytes (lru, fifo, ml) or 4 KiB (lfu).
//
// Thread-safety: not thread-safe (see EvictionPolicy); the owner serializes every call.
#ifndef CAIRN_POLICY_POLICY_ENGINE_H_
#define CAIRN_POLICY_POLICY_ENGINE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "policy/entry_list.h"
#include "policy/eviction_policy.h"
#include "policy/ranking.h"

namespace cairn::policy {

// Tunables. The defaults are the production values; tests shrink them.
struct PolicyEngineOptions {
  // "lfu": every use count is halved once per max(lfu_aging_min_ops, lfu_aging_ops_per_entry x
  // entries in the class) inserts plus accesses in that class.
  uint64_t lfu_aging_min_ops = 1024;
  uint64_t lfu_aging_ops_per_entry = 8;
};

class PolicyEngine final : public EvictionPolicy {
 public:
  // An empty engine whose base ranking is `kind`: one of EvictionPolicyNames() ("lru", "lfu",
  // "fifo", "ml"). InvalidArgument for any other name (the message lists the known ones).
  static StatusOr<std::unique_ptr<PolicyEngine>> Create(std::string_view kind,
                                                        const PolicyEngineOptions& options = {});

  // The base ranking's name, as given to Create.
  std::string_view name() const override { return name_; }
  // All tracked entries and bytes, pinned ones included.
  size_t size() const override { return index_.size(); }
  uint64_t tracked_bytes() const override { return bytes_; }

  // Re-attributes a tracked entry after the rules changed: takes group, priority, pinned and
  // expires_at_us from `hints` (`cold` is ignored) and keeps its size. If the class, group or
  // pinning changed, the entry is ranked in its new place as if just used, keeping what the
  // ranking learned about it (LFU count, ML probation); a change of TTL only moves it in the TTL
  // index. No-op if `id` is not tracked.
  void Update(const Hash128& id, const EntryHints& hints);

  // Stops tracking and returns up to `max` entries whose expires_at_us is <= `now_us` (any entry
  // with a non-zero deadline, pinned or not), earliest deadline first (ties by id). The caller
  // deletes them; they are not evictions (nothing is learned from them). O(k log t).
  std::vector<Hash128> TakeExpired(int64_t now_us, size_t max);
  // The earliest deadline among tracked entries, or nullopt if none has one; lets the caller
  // schedule its next TakeExpired.
  std::optional<int64_t> NextExpiry() const;

  // Sets the byte quota of `group`; 0 removes it. Entries already over the quota stay until the
  // group inserts again (PickVictimForInsert then evicts from it first).
  void SetGroupQuota(uint32_t group, uint64_t bytes);
  // The quota of `group`, 0 if none.
  uint64_t group_quota(uint32_t group) const;
  // Tracked bytes of `group`, pinned entries included.
  uint64_t group_bytes(uint32_t group) const;
  // Whether inserting `incoming_bytes` more into `group` would exceed its quota (false without
  // one). The caller must evict for the quota while this is true, even if the cache has room.
  bool OverQuota(uint32_t group, uint64_t incoming_bytes) const;

  // The next victim for inserting `incoming_bytes` into `group`. If OverQuota(group,
  // incoming_bytes): the victim of that group (from its lowest class that has an evictable entry),
  // or nullopt if the group has none (all pinned, all rejected by the filter, or empty: the
  // caller then refuses the insert or lets the quota overflow). Otherwise the same as PickVictim.
  // `may_evict` as for PickVictim (null: all entries may be evicted). No state change; call
  // OnRemove for the victim before asking again.
  std::optional<Hash128> PickVictimForInsert(uint32_t group, uint64_t incoming_bytes,
                                             const VictimFilter* may_evict = nullptr);

  // Bytes and number of pinned entries (they count in size()/tracked_bytes() too).
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  size_t pinned_count() const { return pinned_count_; }

  // The hints a tracked entry is filed under now (cold always false), or nullopt if untracked.
  std::optional<EntryHints> HintsOf(const Hash128& id) const;

  // "ml" only: whether `group` is in probation mode (thrashing) in any class. Always false for
  // the other kinds. For metrics and tests.
  bool IsThrashing(uint32_t group) const;

 private:
  using Slot = internal::Slot;
  static constexpr int kClasses = 3;  // Priority::kLow .. kHigh.

  struct GroupInfo {
    uint64_t bytes = 0;
    uint64_t quota = 0;
    size_t entries = 0;
  };
  struct TtlKey {
    int64_t at;
    Hash128 id;
  };
  struct TtlLess {
    bool operator()(const TtlKey& a, const TtlKey& b) const {
      if (a.at != b.at) return a.at < b.at;
      if (a.id.high != b.id.high) return a.id.high < b.id.high;
      return a.id.low < b.id.low;
    }
  };

  PolicyEngine(std::string_view name, internal::RankingKind kind,
               const PolicyEngineOptions& options);

  void DoInsert(const Hash128& id, uint64_t bytes, const EntryHints& hints) override;
  void DoAccess(const Hash128& id) override;
  void DoRemove(const Hash128& id) override { DoRemoveFor(id, RemoveReason::kEvicted); }
  void DoRemoveFor(const Hash128& id, RemoveReason reason) override;
  std::optional<Hash128> DoPickVictim(const VictimFilter* may_evict) override;
  void DoReserve(size_t entries) override { index_.reserve(entries); }

  // Files `s` (whose record fields are set) under the ranking, TTL index, group and byte counts.
  // `adopt`: it comes from another ranking (Update), so the ranking keeps its learned state.
  void Attach(Slot* s, bool cold, bool adopt);
  // The reverse of Attach; the record itself stays in the map.
  void Detach(Slot* s, bool evicted);
  internal::Ranking& RankingOf(const internal::Entry& e) {
    return *classes_[static_cast<int>(e.priority)];
  }

  const std::string_view name_;
  std::unordered_map<Hash128, internal::Entry, internal::IdHash> index_;
  std::array<std::unique_ptr<internal::Ranking>, kClasses> classes_;
  std::set<TtlKey, TtlLess> ttl_;
  std::unordered_map<uint32_t, GroupInfo> groups_;  // Only groups with entries or a quota.
  uint64_t bytes_ = 0;
  uint64_t pinned_bytes_ = 0;
  size_t pinned_count_ = 0;
};

}  // namespace cairn::policy

#endif  // CAIRN_POLICY_POLICY_ENGINE_H_
