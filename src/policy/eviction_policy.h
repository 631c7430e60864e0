// EvictionPolicy: decides which cached entry to drop when room is needed.
//
// Entries are opaque 128-bit ids (cairn::Hash128); the policy never sees keys, files or bytes of
// data. Policies are pure bookkeeping: no I/O, no clock reads, no threads. Anything a policy needs
// to know about time or about the workload comes in through the calls, so the same code runs in
// the page store and in the capacity simulator (bench/policy_sim.cc).
//
// Implementations: PolicyEngine (policy_engine.h), which every MakeEvictionPolicy name returns: a
// base ranking (lru, lfu, fifo, ml) plus priorities, pinning, TTLs and group quotas; and
// LruPolicy (lru_policy.h), the minimal standalone LRU it grew from. Rules: docs/policies.md.
//
// Extending without touching callers: the public methods are non-virtual and forward to private
// hooks (Do*). New knowledge (priorities, pinning, ML hints such as "next epoch needs this") is
// added as new fields of EntryHints or as new non-virtual overloads whose hooks have a default
// implementation, so existing callers and existing policies keep compiling and behaving the same.
//
// Thread-safety: not thread-safe. The owner serializes every call (the page store calls its
// folder's policy under that folder's mutex).
#ifndef CAIRN_POLICY_EVICTION_POLICY_H_
#define CAIRN_POLICY_EVICTION_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/checksum.h"
#include "common/status.h"

namespace cairn::policy {

// Eviction class of an entry. PolicyEngine evicts every evictable kLow entry before any kNormal
// one, and every kNormal one before any kHigh one, whatever their recency or frequency.
enum class Priority : uint8_t { kLow = 0, kNormal = 1, kHigh = 2 };

// What the caller knows about an entry when it starts tracking it. Policies ignore fields they do
// not use (LruPolicy uses only `cold`; PolicyEngine uses all); new fields get defaults that mean
// "nothing special", so `{.cold = true}` and `{}` keep their old meaning.
struct EntryHints {
  // The entry was already cached before this run and has not been used in it yet (e.g. a page
  // found on disk at startup). Policies rank it below every entry inserted or accessed normally.
  bool cold = false;
  // Dataset (mount) the entry belongs to: the unit of quotas and of the "ml" policy's per-dataset
  // adaptation. 0 is an ordinary group like any other.
  uint32_t group = 0;
  Priority priority = Priority::kNormal;
  // Never returned by PickVictim while pinned (it may still expire, see expires_at_us).
  bool pinned = false;
  // TTL deadline in microseconds on the caller's clock; 0 = never expires. PolicyEngine hands
  // entries whose deadline has passed out through TakeExpired; it never reads a clock itself.
  int64_t expires_at_us = 0;
};

// Why an entry stops being tracked. Adaptive policies learn from evictions only: an entry dropped
// because its file changed, was deleted or expired says nothing about the replacement decision.
enum class RemoveReason : uint8_t {
  kEvicted,  // Removed to make room (the caller evicted a victim).
  kDropped,  // Removed for any other reason (deleted, invalidated, expired, replaced).
};

// Returns true if the entry may be evicted now (false for an entry in use, pinned, ...).
using VictimFilter = std::function<bool(const Hash128&)>;

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  EvictionPolicy(const EvictionPolicy&) = delete;
  EvictionPolicy& operator=(const EvictionPolicy&) = delete;

  // Short lowercase name, the one MakeEvictionPolicy accepts ("lru").
  virtual std::string_view name() const = 0;

  // Starts tracking `id`, which occupies `bytes`. If `id` is already tracked, its size is updated
  // and the call counts as an insert of a new copy (for LRU: it becomes most recently used, or
  // least recently used with hints.cold).
  void OnInsert(const Hash128& id, uint64_t bytes, const EntryHints& hints = {}) {
    DoInsert(id, bytes, hints);
  }

  // Records a use of `id`. No-op if `id` is not tracked.
  void OnAccess(const Hash128& id) { DoAccess(id); }

  // Stops tracking `id` (evicted, removed, replaced by nothing). No-op if `id` is not tracked.
  // Counts as an eviction (RemoveReason::kEvicted) for policies that learn from evictions: most
  // removals in a cache are evictions. Callers that know better use the overload below.
  void OnRemove(const Hash128& id) { DoRemoveFor(id, RemoveReason::kEvicted); }

  // As above, saying why. Policies that do not learn from evictions treat both reasons alike.
  void OnRemove(const Hash128& id, RemoveReason reason) { DoRemoveFor(id, reason); }

  // The entry to evict next, or nullopt if nothing is tracked. Does not change any state: the
  // caller drops the entry and then calls OnRemove; calling PickVictim again before that returns
  // the same id.
  std::optional<Hash128> PickVictim() { return DoPickVictim(nullptr); }

  // As above, but only among entries for which `may_evict` returns true; nullopt if none. The cost
  // grows with the number of entries the filter rejects (they are skipped one by one), so keep
  // rejected entries few (in-use entries, not a whole pinned dataset).
  std::optional<Hash128> PickVictim(const VictimFilter& may_evict) {
    return DoPickVictim(&may_evict);
  }

  // Capacity hint: about `entries` entries will be tracked soon (e.g. a startup scan found that
  // many), so a policy can size its tables once instead of growing them step by step.
  void Reserve(size_t entries) { DoReserve(entries); }

  // Number of tracked entries and the sum of their sizes.
  virtual size_t size() const = 0;
  virtual uint64_t tracked_bytes() const = 0;

 protected:
  EvictionPolicy() = default;

 private:
  virtual void DoInsert(const Hash128& id, uint64_t bytes, const EntryHints& hints) = 0;
  virtual void DoAccess(const Hash128& id) = 0;
  virtual void DoRemove(const Hash128& id) = 0;
  // Default: the reason does not matter to this policy.
  virtual void DoRemoveFor(const Hash128& id, RemoveReason reason) { DoRemove(id); }
  // `may_evict` is null when every entry may be evicted.
  virtual std::optional<Hash128> DoPickVictim(const VictimFilter* may_evict) = 0;
  virtual void DoReserve(size_t entries) {}
};

// Builds a policy by name. Known names: EvictionPolicyNames() ("lru", "lfu", "fifo", "ml"; see
// docs/policies.md). Every name yields a PolicyEngine (policy/policy_engine.h) whose base ranking
// is that policy, so priorities, pinning, TTLs and quotas work whatever the name;
// PolicyEngine::Create returns the same object with its full type. InvalidArgument for any other
// name (the message lists the known ones). The returned policy is empty and owned by the caller.
StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name);

// The names MakeEvictionPolicy accepts, for help texts and config validation.
std::vector<std::string_view> EvictionPolicyNames();

}  // namespace cairn::policy

#endif  // CAIRN_POLICY_EVICTION_POLICY_H_
