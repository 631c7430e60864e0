// CacheDir: cache rules. TTL expiry, re-attribution when rules change, and group quotas; the
// admission side of quotas (evicting from an over-quota group) is in cache_dir.cc.
#include <limits>
#include <unordered_map>

#include "pagestore/cache_dir.h"

namespace cairn::pagestore {

policy::EntryHints CacheDir::Resolve(std::string_view object_id) const {
  return config_.attributes ? config_.attributes->Resolve(object_id) : policy::EntryHints{};
}

// ---- TTL -----------------------------------------------------------------------------------

bool CacheDir::ExpiredLocked(const Hash128& id) const {
  // The earliest deadline first: while it is in the future (or there is none) no page has
  // expired, which costs one clock read and no lookup.
  std::optional<int64_t> next = policy_->NextExpiry();
  if (!next) return false;
  const int64_t now = config_.clock->NowMicros();
  if (*next > now) return false;
  std::optional<policy::EntryHints> hints = policy_->HintsOf(id);
  return hints && hints->expires_at_us != 0 && hints->expires_at_us <= now;
}

std::optional<CacheDir::Victim> CacheDir::EraseIfExpiredLocked(Index::iterator it) {
  if (!ExpiredLocked(it->first)) return std::nullopt;
  ++expired_pages_;
  Victim v{it->first, 0, it->second.object_id, EvictionReason::kExpired};
  v.charge = EraseLocked(it, policy::RemoveReason::kDropped);
  return v;
}

void CacheDir::TakeExpiredLocked(int64_t now_us, size_t max, std::vector<Victim>* dropped) {
  for (const Hash128& id : policy_->TakeExpired(now_us, max)) {
    auto it = index_.find(id);
    if (it == index_.end()) continue;  // Unreachable: the policy tracks exactly the index.
    ++expired_pages_;
    // TakeExpired stopped tracking it already; EraseLocked's OnRemove is then a no-op.
    std::shared_ptr<const std::string> object_id = it->second.object_id;
    dropped->push_back({id, EraseLocked(it, policy::RemoveReason::kDropped), std::move(object_id),
                        EvictionReason::kExpired});
  }
}

size_t CacheDir::SweepExpired(int64_t now_us) {
  size_t total = 0;
  while (true) {
    std::vector<Victim> dropped;
    {
      MutexLock l(&mu_);
      if (stopping_) break;
      TakeExpiredLocked(now_us, kExpiredBatch, &dropped);
    }
    DropVictims(dropped);
    total += dropped.size();
    if (dropped.size() < kExpiredBatch) break;
  }
  return total;
}

std::optional<int64_t> CacheDir::NextExpiry() const {
  MutexLock l(&mu_);
  return policy_->NextExpiry();
}

// ---- Attributes ----------------------------------------------------------------------------

void CacheDir::ApplyResolver(const std::vector<Attributed>& batch) {
  // Pages of one object share one string: resolve each object once.
  std::unordered_map<const std::string*, policy::EntryHints> by_object;
  std::vector<const policy::EntryHints*> hints;
  hints.reserve(batch.size());
  // The resolver states a TTL as a deadline from now; a page already cached keeps counting from
  // when it was cached (below), so unrelated rule edits never push its expiry back.
  const int64_t resolved_at = config_.clock->NowMicros();
  for (const Attributed& page : batch) {
    auto [it, fresh] = by_object.try_emplace(page.object_id.get());
    if (fresh) it->second = Resolve(*page.object_id);
    hints.push_back(&it->second);
  }
  MutexLock l(&mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = index_.find(batch[i].id);
    // Gone, or (impossible with the same id, but cheap to rule out) another object: skip.
    if (it == index_.end() || it->second.object_id != batch[i].object_id) continue;
    policy::EntryHints h = *hints[i];
    if (h.expires_at_us != 0 && it->second.cached_at_us != 0) {
      // Saturating, as the resolver does: a deadline at INT64_MAX (the resolver saturated it) on a
      // page cached after resolved_at was read must stay far away, not wrap into the past.
      int64_t ttl_us = 0;
      int64_t at = 0;
      if (__builtin_sub_overflow(h.expires_at_us, resolved_at, &ttl_us) ||
          __builtin_add_overflow(it->second.cached_at_us, ttl_us, &at)) {
        at = std::numeric_limits<int64_t>::max();
      }
      h.expires_at_us = at;
    }
    policy_->Update(batch[i].id, h);
    if (it->second.open_file) ListHitLocked(batch[i].id, it->second);  // Its new deadline.
  }
  // An unpinned page, or a raised quota's worth of pages moved away, may be room for a writer.
  ++room_epoch_;
  room_cv_.NotifyAll();
}

void CacheDir::Reattribute() {
  // Walks the index bucket by bucket, one chunk per hold of mu_. A rehash (the index grew)
  // reshuffles the buckets, so the walk then starts over: refiling a page twice under the same
  // hints changes nothing, and the index can only double a few times. Pages added meanwhile
  // were resolved under the new rules already (the caller changed them before calling).
  size_t bucket = 0;
  size_t buckets = 0;
  while (true) {
    std::vector<Attributed> batch;
    bool done;
    {
      MutexLock l(&mu_);
      if (stopping_) return;
      if (index_.bucket_count() != buckets) {
        buckets = index_.bucket_count();
        bucket = 0;
      }
      for (; bucket < buckets && batch.size() < kRulesBatch; ++bucket) {
        for (auto it = index_.begin(bucket); it != index_.end(bucket); ++it) {
          if (it->second.object_id) batch.push_back({it->first, it->second.object_id});
        }
      }
      done = bucket >= buckets;
    }
    if (!batch.empty()) ApplyResolver(batch);
    if (done) return;
  }
}

// ---- Quotas --------------------------------------------------------------------------------

void CacheDir::SetGroupQuota(uint32_t group, uint64_t bytes) {
  MutexLock l(&mu_);
  policy_->SetGroupQuota(group, bytes);
  ++room_epoch_;  // A raised quota may admit a waiting writer.
  room_cv_.NotifyAll();
}

uint64_t CacheDir::GroupBytes(uint32_t group) const {
  MutexLock l(&mu_);
  return policy_->group_bytes(group);
}

}  // namespace cairn::pagestore
