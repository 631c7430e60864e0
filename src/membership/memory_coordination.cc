#include "membership/memory_coordination.h"

#include <algorithm>
#include <utility>

namespace cairn::membership {

struct MemoryCoordination::Watcher {
  std::string prefix;
  WatchCallback callback;
};

// Cancels on destruction; holds the owner by pointer (handles must die before the owner).
class MemoryCoordination::Handle : public WatchHandle {
 public:
  Handle(MemoryCoordination* owner, std::shared_ptr<Watcher> watcher)
      : owner_(owner), watcher_(std::move(watcher)) {}
  ~Handle() override { owner_->Cancel(watcher_); }

 private:
  MemoryCoordination* owner_;
  std::shared_ptr<Watcher> watcher_;
};

namespace {
bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}
}  // namespace

MemoryCoordination::MemoryCoordination(Clock* clock)
    : clock_(clock != nullptr ? clock : Clock::Real()) {
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

MemoryCoordination::~MemoryCoordination() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  dispatcher_.join();
}

Status MemoryCoordination::CheckAvailableLocked() {
  if (unavailable_) return UnavailableError("memory coordination: store marked unavailable");
  ExpireLeasesLocked();
  return Status::Ok();
}

void MemoryCoordination::ExpireLeases() {
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
}

void MemoryCoordination::ExpireLeasesLocked() {
  const int64_t now = clock_->NowMicros();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires_at_micros > now) {
      ++it;
      continue;
    }
    Lease lease = std::move(it->second);
    it = leases_.erase(it);
    if (lease.keys.empty()) continue;
    const int64_t rev = ++revision_;
    std::vector<WatchEvent> events;
    for (const std::string& key : lease.keys) EraseLocked(key, rev, &events);
    PublishLocked(std::move(events));
  }
}

void MemoryCoordination::SetUnavailable(bool unavailable) {
  MutexLock lock(&mu_);
  unavailable_ = unavailable;
}

int64_t MemoryCoordination::revision() {
  MutexLock lock(&mu_);
  return revision_;
}

void MemoryCoordination::PutLocked(const std::string& key, std::string_view value, int64_t lease_id,
                                   int64_t rev) {
  KeyValue& kv = kvs_[key];
  if (kv.create_revision == 0) kv.create_revision = rev;
  if (kv.lease_id != 0 && kv.lease_id != lease_id) {
    auto old = leases_.find(kv.lease_id);
    if (old != leases_.end()) old->second.keys.erase(key);
  }
  if (lease_id != 0) leases_[lease_id].keys.insert(key);
  kv.key = key;
  kv.value = std::string(value);
  kv.mod_revision = rev;
  kv.lease_id = lease_id;
  PublishLocked({WatchEvent{EventType::kPut, key, kv.value, rev}});
}

void MemoryCoordination::EraseLocked(const std::string& key, int64_t rev,
                                     std::vector<WatchEvent>* events) {
  auto it = kvs_.find(key);
  if (it == kvs_.end()) return;
  if (it->second.lease_id != 0) {
    auto lease = leases_.find(it->second.lease_id);
    if (lease != leases_.end()) lease->second.keys.erase(key);
  }
  kvs_.erase(it);
  events->push_back(WatchEvent{EventType::kDelete, key, "", rev});
}

void MemoryCoordination::PublishLocked(std::vector<WatchEvent> events) {
  if (events.empty()) return;
  for (const WatchEvent& e : events) history_.push_back(e);
  while (history_.size() > kHistoryLimit) {
    compacted_revision_ = history_.front().mod_revision;
    history_.pop_front();
  }
  // A revision is never split by trimming: drop the rest of a partially trimmed revision.
  while (!history_.empty() && history_.front().mod_revision == compacted_revision_) {
    history_.pop_front();
  }
  for (const std::shared_ptr<Watcher>& w : watchers_) {
    WatchUpdate update;
    for (const WatchEvent& e : events) {
      if (HasPrefix(e.key, w->prefix)) update.events.push_back(e);
    }
    if (!update.events.empty()) queue_.push_back(Delivery{w, std::move(update)});
  }
  cv_.NotifyAll();
}

StatusOr<int64_t> MemoryCoordination::Put(std::string_view key, std::string_view value,
                                          int64_t lease_id) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  if (key.empty()) return InvalidArgumentError("put: empty key");
  if (lease_id != 0 && !leases_.contains(lease_id)) {
    return NotFoundError("put: lease " + std::to_string(lease_id) + " not found");
  }
  const int64_t rev = ++revision_;
  PutLocked(std::string(key), value, lease_id, rev);
  return rev;
}

StatusOr<KeyValue> MemoryCoordination::Get(std::string_view key) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  auto it = kvs_.find(std::string(key));
  if (it == kvs_.end()) return NotFoundError("no key '" + std::string(key) + "'");
  return it->second;
}

StatusOr<RangeResult> MemoryCoordination::GetPrefix(std::string_view prefix) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  RangeResult result;
  result.revision = revision_;
  for (auto it = kvs_.lower_bound(std::string(prefix)); it != kvs_.end(); ++it) {
    if (!HasPrefix(it->first, prefix)) break;
    result.entries.push_back(it->second);
  }
  return result;
}

StatusOr<bool> MemoryCoordination::Delete(std::string_view key) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  if (!kvs_.contains(std::string(key))) return false;
  const int64_t rev = ++revision_;
  std::vector<WatchEvent> events;
  EraseLocked(std::string(key), rev, &events);
  PublishLocked(std::move(events));
  return true;
}

StatusOr<int64_t> MemoryCoordination::CompareAndSwap(std::string_view key,
                                                     int64_t expected_mod_revision,
                                                     std::string_view value, int64_t lease_id) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  if (key.empty()) return InvalidArgumentError("compare-and-swap: empty key");
  auto it = kvs_.find(std::string(key));
  const int64_t current = it == kvs_.end() ? 0 : it->second.mod_revision;
  if (current != expected_mod_revision) {
    return FailedPreconditionError(
        "compare-and-swap on '" + std::string(key) + "': expected mod_revision " +
        std::to_string(expected_mod_revision) + ", found " + std::to_string(current));
  }
  if (lease_id != 0 && !leases_.contains(lease_id)) {
    return NotFoundError("compare-and-swap: lease " + std::to_string(lease_id) + " not found");
  }
  const int64_t rev = ++revision_;
  PutLocked(std::string(key), value, lease_id, rev);
  return rev;
}

StatusOr<int64_t> MemoryCoordination::GrantLease(std::chrono::seconds ttl) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  if (ttl < std::chrono::seconds(1)) return InvalidArgumentError("lease TTL must be >= 1 s");
  const int64_t id = next_lease_id_++;
  Lease& lease = leases_[id];
  lease.ttl_micros = std::chrono::duration_cast<std::chrono::microseconds>(ttl).count();
  lease.expires_at_micros = clock_->NowMicros() + lease.ttl_micros;
  return id;
}

Status MemoryCoordination::KeepAlive(int64_t lease_id) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return NotFoundError("lease " + std::to_string(lease_id) + " not found");
  it->second.expires_at_micros = clock_->NowMicros() + it->second.ttl_micros;
  return Status::Ok();
}

Status MemoryCoordination::RevokeLease(int64_t lease_id) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return NotFoundError("lease " + std::to_string(lease_id) + " not found");
  Lease lease = std::move(it->second);
  leases_.erase(it);
  if (lease.keys.empty()) return Status::Ok();
  const int64_t rev = ++revision_;
  std::vector<WatchEvent> events;
  for (const std::string& key : lease.keys) EraseLocked(key, rev, &events);
  PublishLocked(std::move(events));
  return Status::Ok();
}

StatusOr<std::unique_ptr<WatchHandle>> MemoryCoordination::Watch(std::string_view prefix,
                                                                 int64_t start_revision,
                                                                 WatchCallback callback) {
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(CheckAvailableLocked());
  if (start_revision < 0) return InvalidArgumentError("watch: negative start revision");
  if (start_revision != 0 && start_revision <= compacted_revision_) {
    return FailedPreconditionError("watch from revision " + std::to_string(start_revision) +
                                   ": compacted up to " + std::to_string(compacted_revision_));
  }
  auto watcher = std::make_shared<Watcher>(Watcher{std::string(prefix), std::move(callback)});
  if (start_revision != 0) {
    // Replay history one revision per update, as a live watch would have seen it.
    WatchUpdate update;
    for (const WatchEvent& e : history_) {
      if (e.mod_revision < start_revision || !HasPrefix(e.key, prefix)) continue;
      if (!update.events.empty() && update.events.back().mod_revision != e.mod_revision) {
        queue_.push_back(Delivery{watcher, std::move(update)});
        update = WatchUpdate{};
      }
      update.events.push_back(e);
    }
    if (!update.events.empty()) queue_.push_back(Delivery{watcher, std::move(update)});
    cv_.NotifyAll();
  }
  watchers_.push_back(watcher);
  return std::unique_ptr<WatchHandle>(new Handle(this, std::move(watcher)));
}

void MemoryCoordination::Cancel(const std::shared_ptr<Watcher>& watcher) {
  MutexLock lock(&mu_);
  std::erase(watchers_, watcher);
  std::erase_if(queue_, [&](const Delivery& d) { return d.watcher == watcher; });
  // Wait out a callback in flight so the caller may free what the callback uses.
  cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return running_ != watcher; });
}

void MemoryCoordination::WaitForWatchersIdle() {
  MutexLock lock(&mu_);
  cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return queue_.empty() && running_ == nullptr; });
}

void MemoryCoordination::DispatchLoop() {
  MutexLock lock(&mu_);
  while (true) {
    cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping with nothing left to deliver.
    Delivery d = std::move(queue_.front());
    queue_.pop_front();
    running_ = d.watcher;
    mu_.Unlock();
    d.watcher->callback(d.update);
    mu_.Lock();
    running_ = nullptr;
    cv_.NotifyAll();
  }
}

}  // namespace cairn::membership
