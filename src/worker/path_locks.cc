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
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) table_->Drop(it->first, it->second);
  locked_.clear();
  table_ = nullptr;
}

PathLocks::Held PathLocks::Lock(const std::string& path) {
  Held held;
  held.table_ = this;
  held.locked_.emplace_back(path, Acquire(path));
  return held;
}

PathLocks::Held PathLocks::Lock(const std::string& a, const std::string& b) {
  if (a == b) return Lock(a);
  const std::string& first = a < b ? a : b;
  const std::string& second = a < b ? b : a;
  Held held;
  held.table_ = this;
  held.locked_.emplace_back(first, Acquire(first));
  held.locked_.emplace_back(second, Acquire(second));
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
    std::unique_ptr<Entry>& slot = entries_[path];
    if (slot == nullptr) slot = std::make_unique<Entry>();
    entry = slot.get();
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
