#include "client/page_buffer.h"

namespace cairn::client {

AlignedBytes PageMemory::Take(size_t n) {
  if (n == page_size_) {
    MutexLock l(&mu_);
    if (!free_.empty()) {
      AlignedBytes bytes = std::move(free_.back());
      free_.pop_back();
      return bytes;
    }
  }
  return AllocateAligned(n);
}

void PageMemory::Give(AlignedBytes bytes, size_t n) {
  if (n != page_size_ || !bytes) return;
  MutexLock l(&mu_);
  if (free_.size() < max_free_) free_.push_back(std::move(bytes));
}

std::shared_ptr<PageBuffer::Slot> PageBuffer::Find(const Hash128& id) {
  MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.slot;
}

std::shared_ptr<PageBuffer::Slot> PageBuffer::Create(const Hash128& id, uint64_t bytes) {
  const uint64_t charge = Footprint(bytes);
  MutexLock l(&mu_);
  if (entries_.count(id)) return nullptr;
  // Evict from the cold end. Slots still being filled are kept alive by their fetcher's
  // shared_ptr, so dropping them here only forgets them.
  while (used_ + charge > capacity_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.back());
    used_ -= victim->second.charged;
    entries_.erase(victim);
    lru_.pop_back();
  }
  auto slot = std::make_shared<Slot>();
  slot->memory = memory_;
  lru_.push_front(id);
  entries_.emplace(id, Entry{slot, charge, lru_.begin()});
  used_ += charge;
  return slot;
}

void PageBuffer::Erase(const Hash128& id) {
  MutexLock l(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  used_ -= it->second.charged;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

}  // namespace cairn::client
