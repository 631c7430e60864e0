// WorkerRegistry: keeps one worker's record in etcd (WorkerKey(id) -> EncodeWorkerRecord) for as
// long as the worker runs, attached to a lease so that a crashed worker disappears within one TTL
// and a stopped one at once.
//
// A background thread grants a lease, puts the key under it and keeps the lease alive every
// ttl/3. When a keep-alive says the lease is gone (NotFound: the worker stalled past its TTL, or
// someone revoked it) the thread re-registers at once under a new lease. When the store is
// unreachable it retries with jittered exponential backoff (retry_min..retry_max; while the lease
// may still be alive, at least every ttl/3), logging one warning when an outage starts and one
// line when it ends, never one per attempt. A store that is down when the worker starts is not
// an error: the worker serves, and registers when the store comes back.
//
// The same id registered twice (a new process while the lease of a crashed one has not expired
// yet) is not an error: the newer Put simply takes the key over (and moves it to its own lease,
// so the old lease's expiry or revocation no longer deletes it).
//
// Thread-safety: all methods are thread-safe. Lock order: stop_mu_ before mu_; no lock is held
// while calling the Coordination.
#ifndef CAIRN_MEMBERSHIP_WORKER_REGISTRY_H_
#define CAIRN_MEMBERSHIP_WORKER_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "membership/coordination.h"
#include "membership/records.h"

namespace cairn::membership {

struct WorkerRegistryOptions {
  // Lease TTL (>= 1 s): how long a dead worker stays listed. Keep-alives are sent every ttl/3.
  std::chrono::seconds ttl{5};
  // Backoff between attempts while the store is unreachable.
  std::chrono::milliseconds retry_min{200};
  std::chrono::milliseconds retry_max{3000};
  // How long Stop() keeps trying to revoke the lease while the store does not answer.
  std::chrono::milliseconds stop_timeout{2000};
};

class WorkerRegistry {
 public:
  // Validates `record` (ValidateWorkerRecord) and `options` (ttl >= 1 s, retry_min > 0,
  // retry_max >= retry_min), then starts the background thread and returns at once, without
  // waiting for the store. InvalidArgument for a bad record, bad options or a null `coord`.
  // `coord` is borrowed and must outlive the registry.
  static StatusOr<std::unique_ptr<WorkerRegistry>> Start(Coordination* coord, WorkerRecord record,
                                                         WorkerRegistryOptions options = {});

  // Calls Stop().
  ~WorkerRegistry();
  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  // Stops the thread and revokes the lease, so the key disappears at once. While the store does
  // not answer, the revoke is retried for at most options.stop_timeout; after that the key
  // expires on its own within one TTL. The only other wait is for a Coordination call already in
  // flight, which is bounded by the Coordination's own request timeout. Idempotent; concurrent
  // callers all return once the registry is stopped.
  void Stop();

  // Blocks up to `timeout` until the key has been written (or Stop() was called). Returns
  // registered().
  bool WaitRegistered(std::chrono::milliseconds timeout);

  // True if the key is believed present now: it was written, no keep-alive has reported the
  // lease lost since, the last confirmation (put or keep-alive) is less than one TTL old, and
  // Stop() has not been called.
  bool registered() const;

  // Successful registrations (the first and every re-registration after a lost lease).
  uint64_t registrations() const;

  // Keep-alives that failed (lease lost or store unreachable).
  uint64_t keepalive_failures() const;

 private:
  WorkerRegistry(Coordination* coord, WorkerRecord record, WorkerRegistryOptions options);

  void Run();
  // One attempt at granting a lease (if none is held) and writing the key.
  Status RegisterOnce();
  // One keep-alive of the held lease.
  Status KeepAliveOnce();
  // Revokes the lease after the thread has ended, retrying until stop_timeout.
  void RevokeAfterStop();
  // Waits `d` unless Stop() is called first; false if stopping.
  bool SleepUnlessStopped(std::chrono::milliseconds d) EXCLUDES(mu_);
  bool stopping() const EXCLUDES(mu_);

  Coordination* const coord_;
  const WorkerRecord record_;
  const std::string key_;
  const std::string value_;
  const WorkerRegistryOptions options_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool registered_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point confirmed_at_ GUARDED_BY(mu_);
  uint64_t registrations_ GUARDED_BY(mu_) = 0;
  uint64_t keepalive_failures_ GUARDED_BY(mu_) = 0;

  // Owned by the background thread while it runs; Stop() reads it only after joining.
  int64_t lease_id_ = 0;
  bool key_written_ = false;  // Under lease_id_.

  Mutex stop_mu_;  // Serialises Stop() calls.
  bool stopped_ GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_WORKER_REGISTRY_H_
