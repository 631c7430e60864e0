// MemoryCoordination: an in-process Coordination with etcd's semantics (revisions, leases, CAS,
// prefix watches with history), for fast, deterministic unit tests of code that uses membership.
//
// Time: leases expire on the injected Clock (use FakeClock in tests). Expiry is evaluated lazily
// at the start of every call, and by ExpireLeases(); a test that advances a FakeClock calls
// ExpireLeases() (or any method) to make the expiry happen, and watchers then see the deletes.
//
// Watches: callbacks run on one dispatcher thread owned by this object, in revision order; the
// mutation that produced an event has returned (or is returning) when the callback runs, never
// under this object's lock, so callbacks may call back into it. History: the last
// `kHistoryLimit` events are kept for watches with a start revision; older ones count as
// compacted (FailedPrecondition, like etcd).
//
// Never returns Unavailable (there is no network); SetUnavailable(true) makes every call fail
// with Unavailable, to exercise callers' error paths.
//
// Thread-safety: thread-safe. WatchHandles must be destroyed before this object.
#ifndef CAIRN_MEMBERSHIP_MEMORY_COORDINATION_H_
#define CAIRN_MEMBERSHIP_MEMORY_COORDINATION_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "membership/coordination.h"

namespace cairn::membership {

class MemoryCoordination : public Coordination {
 public:
  static constexpr size_t kHistoryLimit = 100'000;

  // `clock` is borrowed and must outlive this object; nullptr = Clock::Real().
  explicit MemoryCoordination(Clock* clock = nullptr);
  ~MemoryCoordination() override;
  MemoryCoordination(const MemoryCoordination&) = delete;
  MemoryCoordination& operator=(const MemoryCoordination&) = delete;

  StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                        int64_t lease_id = 0) override;
  StatusOr<KeyValue> Get(std::string_view key) override;
  StatusOr<RangeResult> GetPrefix(std::string_view prefix) override;
  StatusOr<bool> Delete(std::string_view key) override;
  StatusOr<int64_t> CompareAndSwap(std::string_view key, int64_t expected_mod_revision,
                                   std::string_view value, int64_t lease_id = 0) override;
  StatusOr<int64_t> GrantLease(std::chrono::seconds ttl) override;
  Status KeepAlive(int64_t lease_id) override;
  Status RevokeLease(int64_t lease_id) override;
  StatusOr<std::unique_ptr<WatchHandle>> Watch(std::string_view prefix, int64_t start_revision,
                                               WatchCallback callback) override;

  // Deletes the keys of every lease whose TTL has run out on the clock (one revision per lease).
  void ExpireLeases();
  // While true, every call returns Unavailable (a store outage for tests).
  void SetUnavailable(bool unavailable);
  // The current store revision.
  int64_t revision();
  // Blocks until every queued watch update has been delivered (tests use it to avoid sleeps).
  void WaitForWatchersIdle();

 private:
  struct Watcher;
  class Handle;
  struct Lease {
    int64_t ttl_micros = 0;
    int64_t expires_at_micros = 0;
    std::set<std::string> keys;
  };
  struct Delivery {
    std::shared_ptr<Watcher> watcher;
    WatchUpdate update;
  };

  Status CheckAvailableLocked() REQUIRES(mu_);
  void ExpireLeasesLocked() REQUIRES(mu_);
  // Writes key=value at revision `rev` (caller bumped revision_), fixing lease bookkeeping.
  void PutLocked(const std::string& key, std::string_view value, int64_t lease_id, int64_t rev)
      REQUIRES(mu_);
  void EraseLocked(const std::string& key, int64_t rev, std::vector<WatchEvent>* events)
      REQUIRES(mu_);
  // Records one revision's events in history and queues them for matching watchers.
  void PublishLocked(std::vector<WatchEvent> events) REQUIRES(mu_);
  void Cancel(const std::shared_ptr<Watcher>& watcher);
  void DispatchLoop();

  Clock* const clock_;
  Mutex mu_;
  CondVar cv_;
  bool unavailable_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  int64_t revision_ GUARDED_BY(mu_) = 1;  // etcd starts at 1 too.
  int64_t next_lease_id_ GUARDED_BY(mu_) = 0x1000;
  std::map<std::string, KeyValue> kvs_ GUARDED_BY(mu_);
  std::map<int64_t, Lease> leases_ GUARDED_BY(mu_);
  std::deque<WatchEvent> history_ GUARDED_BY(mu_);
  int64_t compacted_revision_ GUARDED_BY(mu_) = 0;  // Events at or below are forgotten.
  std::vector<std::shared_ptr<Watcher>> watchers_ GUARDED_BY(mu_);
  std::deque<Delivery> queue_ GUARDED_BY(mu_);
  std::shared_ptr<Watcher> running_ GUARDED_BY(mu_);  // Whose callback runs now.
  std::thread dispatcher_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_MEMORY_COORDINATION_H_
