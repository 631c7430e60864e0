#include "policy/policy_engine.h"

#include <algorithm>
#include <string>

namespace cairn::policy {
namespace {

using internal::Entry;
using internal::RankingKind;

struct KindName {
  std::string_view name;
  RankingKind kind;
};
constexpr KindName kKinds[] = {
    {"lru", RankingKind::kLru},
    {"lfu", RankingKind::kLfu},
    {"fifo", RankingKind::kFifo},
    {"ml", RankingKind::kMl},
};

// An out-of-range value (a cast from a bad config number) is treated as the nearest class.
Priority ClampPriority(Priority p) {
  return static_cast<uint8_t>(p) > static_cast<uint8_t>(Priority::kHigh) ? Priority::kHigh : p;
}

}  // namespace

std::vector<std::string_view> EvictionPolicyNames() {
  std::vector<std::string_view> names;
  for (const KindName& k : kKinds) names.push_back(k.name);
  return names;
}

StatusOr<std::unique_ptr<PolicyEngine>> PolicyEngine::Create(std::string_view kind,
                                                             const PolicyEngineOptions& options) {
  for (const KindName& k : kKinds) {
    if (k.name == kind)
      return std::unique_ptr<PolicyEngine>(new PolicyEngine(k.name, k.kind, options));
  }
  std::string known;
  for (const KindName& k : kKinds) {
    if (!known.empty()) known += ", ";
    known += k.name;
  }
  return InvalidArgumentError("unknown eviction policy '" + std::string(kind) +
                              "' (known: " + known + ")");
}

PolicyEngine::PolicyEngine(std::string_view name, RankingKind kind,
                           const PolicyEngineOptions& options)
    : name_(name) {
  internal::RankingOptions ranking_options{
      .lfu_aging_min_ops = options.lfu_aging_min_ops,
      .lfu_aging_ops_per_entry = options.lfu_aging_ops_per_entry,
  };
  for (auto& ranking : classes_) ranking = internal::MakeRanking(kind, ranking_options);
}

void PolicyEngine::Attach(Slot* s, bool cold, bool adopt) {
  Entry& e = s->second;
  bytes_ += e.bytes;
  GroupInfo& group = groups_[e.group];
  group.bytes += e.bytes;
  ++group.entries;
  if (e.pinned) {
    pinned_bytes_ += e.bytes;
    ++pinned_count_;
    if (!adopt) RankingOf(e).InitState(e, cold);
  } else if (adopt) {
    RankingOf(e).Adopt(s);
  } else {
    RankingOf(e).Insert(s, cold);
  }
  if (e.expires_at_us != 0) ttl_.insert(TtlKey{e.expires_at_us, s->first});
}

void PolicyEngine::Detach(Slot* s, bool evicted) {
  Entry& e = s->second;
  bytes_ -= e.bytes;
  auto group = groups_.find(e.group);
  if (group != groups_.end()) {  // Always found while Attach/Detach pair up.
    group->second.bytes -= e.bytes;
    --group->second.entries;
    if (group->second.entries == 0 && group->second.quota == 0) groups_.erase(group);
  }
  if (e.pinned) {
    pinned_bytes_ -= e.bytes;
    --pinned_count_;
  } else {
    RankingOf(e).Remove(s, evicted);
  }
  if (e.expires_at_us != 0) ttl_.erase(TtlKey{e.expires_at_us, s->first});
}

void PolicyEngine::DoInsert(const Hash128& id, uint64_t bytes, const EntryHints& hints) {
  auto [it, inserted] = index_.try_emplace(id);
  Slot* s = &*it;
  // A new copy of a tracked id replaces the old one: not an eviction, and nothing learned about
  // the old copy carries over.
  if (!inserted) Detach(s, /*evicted=*/false);
  Entry& e = s->second;
  e = Entry{};
  e.bytes = bytes;
  e.group = hints.group;
  e.priority = ClampPriority(hints.priority);
  e.pinned = hints.pinned;
  e.expires_at_us = hints.expires_at_us;
  Attach(s, hints.cold, /*adopt=*/false);
}

void PolicyEngine::DoAccess(const Hash128& id) {
  auto it = index_.find(id);
  if (it == index_.end() || it->second.pinned) return;
  RankingOf(it->second).Access(&*it);
}

void PolicyEngine::DoRemoveFor(const Hash128& id, RemoveReason reason) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  Detach(&*it, reason == RemoveReason::kEvicted);
  index_.erase(it);
}

std::optional<Hash128> PolicyEngine::DoPickVictim(const VictimFilter* may_evict) {
  for (auto& ranking : classes_) {
    if (Slot* s = ranking->Victim(may_evict)) return s->first;
  }
  return std::nullopt;
}

void PolicyEngine::Update(const Hash128& id, const EntryHints& hints) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  Slot* s = &*it;
  Entry& e = s->second;
  const Priority priority = ClampPriority(hints.priority);
  if (e.group == hints.group && e.priority == priority && e.pinned == hints.pinned) {
    if (e.expires_at_us != hints.expires_at_us) {
      if (e.expires_at_us != 0) ttl_.erase(TtlKey{e.expires_at_us, id});
      e.expires_at_us = hints.expires_at_us;
      if (e.expires_at_us != 0) ttl_.insert(TtlKey{e.expires_at_us, id});
    }
    return;
  }
  Detach(s, /*evicted=*/false);
  e.group = hints.group;
  e.priority = priority;
  e.pinned = hints.pinned;
  e.expires_at_us = hints.expires_at_us;
  Attach(s, /*cold=*/false, /*adopt=*/true);
}

std::vector<Hash128> PolicyEngine::TakeExpired(int64_t now_us, size_t max) {
  std::vector<Hash128> expired;
  while (expired.size() < max && !ttl_.empty() && ttl_.begin()->at <= now_us) {
    const Hash128 id = ttl_.begin()->id;
    auto it = index_.find(id);
    if (it == index_.end()) {  // Unreachable: the index and the TTL set change together.
      ttl_.erase(ttl_.begin());
      continue;
    }
    Detach(&*it, /*evicted=*/false);
    index_.erase(it);
    expired.push_back(id);
  }
  return expired;
}

std::optional<int64_t> PolicyEngine::NextExpiry() const {
  if (ttl_.empty()) return std::nullopt;
  return ttl_.begin()->at;
}

void PolicyEngine::SetGroupQuota(uint32_t group, uint64_t bytes) {
  if (bytes != 0) {
    groups_[group].quota = bytes;
    return;
  }
  auto it = groups_.find(group);
  if (it == groups_.end()) return;
  it->second.quota = 0;
  if (it->second.entries == 0) groups_.erase(it);
}

uint64_t PolicyEngine::group_quota(uint32_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second.quota;
}

uint64_t PolicyEngine::group_bytes(uint32_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second.bytes;
}

bool PolicyEngine::OverQuota(uint32_t group, uint64_t incoming_bytes) const {
  auto it = groups_.find(group);
  if (it == groups_.end() || it->second.quota == 0) return false;
  // Written to avoid overflow: bytes + incoming > quota.
  const GroupInfo& g = it->second;
  return g.bytes > g.quota || incoming_bytes > g.quota - g.bytes;
}

std::optional<Hash128> PolicyEngine::PickVictimForInsert(uint32_t group, uint64_t incoming_bytes,
                                                         const VictimFilter* may_evict) {
  if (!OverQuota(group, incoming_bytes)) return DoPickVictim(may_evict);
  for (auto& ranking : classes_) {
    if (Slot* s = ranking->GroupVictim(group, may_evict)) return s->first;
  }
  return std::nullopt;
}

std::optional<EntryHints> PolicyEngine::HintsOf(const Hash128& id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  const Entry& e = it->second;
  return EntryHints{.cold = false,
                    .group = e.group,
                    .priority = e.priority,
                    .pinned = e.pinned,
                    .expires_at_us = e.expires_at_us};
}

bool PolicyEngine::IsThrashing(uint32_t group) const {
  return std::any_of(classes_.begin(), classes_.end(),
                     [group](const auto& ranking) { return ranking->Thrashing(group); });
}

}  // namespace cairn::policy
