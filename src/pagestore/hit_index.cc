#include "pagestore/hit_index.h"

namespace cairn::pagestore {

std::optional<HitIndex::Hit> HitIndex::Find(const Hash128& id, int64_t now_us,
                                            std::vector<Hash128>* full_log) {
  Shard& shard = ShardOf(id);
  MutexLock l(&shard.mu);
  auto it = shard.pages.find(id);
  if (it == shard.pages.end()) return std::nullopt;
  const Entry& entry = it->second;
  if (entry.expires_at_us != 0 && entry.expires_at_us <= now_us) return std::nullopt;
  shard.accesses.push_back(id);
  if (shard.accesses.size() >= kMaxPendingAccesses) {
    full_log->swap(shard.accesses);
    shard.accesses.clear();
    shard.accesses.reserve(kMaxPendingAccesses);
  }
  return entry.hit;
}

void HitIndex::Insert(const Hash128& id, Hit hit, int64_t expires_at_us) {
  Shard& shard = ShardOf(id);
  MutexLock l(&shard.mu);
  shard.pages.insert_or_assign(id, Entry{std::move(hit), expires_at_us});
}

void HitIndex::Erase(const Hash128& id) {
  Shard& shard = ShardOf(id);
  MutexLock l(&shard.mu);
  shard.pages.erase(id);
}

void HitIndex::TakeAccesses(std::vector<Hash128>* out) {
  for (Shard& shard : shards_) {
    MutexLock l(&shard.mu);
    out->insert(out->end(), shard.accesses.begin(), shard.accesses.end());
    shard.accesses.clear();
  }
}

size_t HitIndex::size() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    MutexLock l(&shard.mu);
    n += shard.pages.size();
  }
  return n;
}

}  // namespace cairn::pagestore
