#include "worker/path_locks.h"

#include <utility>

namespace cairn::worker {

PathLocks::Held::Held(Held&& other) noexcept
    : table_(std::exchange(other.table_, nullptr)), locked_(std::move(other.locked_)) {
  other.locked_.clear();
}

PathLocks::Held& PathLocks::Held::operator=(Held&& other) noexcept {
  if (this != &other) {
    Release();
    table_ = std::exchange(other.table_, nullptr);
    locked_ = std::move(other.locked_);
    other.locked_.clear();
  }
  return *this;
}

void PathLocks::Held::Release() {
  // The reverse of the order taken.
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) {
    if (it->second != nullptr) table_->Drop(it->first, it->second);
  }
  locked_.clear();
  table_ = nullptr;
}

PathLocks::Held PathLocks::Lock(const std::string& path) {
  Held held;
  held.table_ = this;
  // Room and name first: nothing that can throw runs between the lock and its record.
  held.locked_.emplace_back(path, nullptr);
  held.locked_.back().second = Acquire(path);
  return held;
}

PathLocks::Held PathLocks::Lock(const std::string& a, const std::string& b) {
  if (a == b) return Lock(a);
  Held held;
  held.table_ = this;
  held.locked_.reserve(2);
  held.locked_.emplace_back(a < b ? a : b, nullptr);
  held.locked_.emplace_back(a < b ? b : a, nullptr);
  for (auto& [path, entry] : held.locked_) entry = Acquire(path);
  return held;
}

size_t PathLocks::size() const {
  MutexLock l(&mu_);
  return entries_.size();
}

PathLocks::Entry* PathLocks::Acquire(const std::string& path) {
  Entry* entry = nullptr;
  {
    MutexLock l(&mu_);
    auto it = entries_.find(path);
    if (it == entries_.end()) it = entries_.emplace(path, std::make_unique<Entry>()).first;
    entry = it->second.get();
    ++entry->users;  // It stays in the table while counted.
  }
  entry->mu.lock();
  return entry;
}

void PathLocks::Drop(const std::string& path, Entry* entry) {
  entry->mu.unlock();
  MutexLock l(&mu_);
  if (--entry->users == 0) entries_.erase(path);
}

}  // namespace cairn::worker
