// Coordination: the narrow seam over the cluster's key-value store (etcd v3 semantics), holding
// worker membership and the mount table. Implementations: EtcdCoordination (the real store, over
// etcd's v3 JSON gateway) and MemoryCoordination (an in-process fake with the same semantics).
//
// Semantics shared by every implementation (the behavioural tests run against both):
//   - Every mutation (put, delete of an existing key, lease expiry/revoke deleting keys) bumps the
//     store revision by one; a key's mod_revision is the revision of its last write.
//   - Keys and values are arbitrary bytes (std::string).
//   - A key attached to a lease is deleted when the lease expires or is revoked.
//   - Watches deliver every change under a prefix in revision order, without gaps, starting at
//     start_revision (0 = changes after the Watch call). Events that share a revision (one lease
//     expiry deleting several keys) arrive in one WatchUpdate.
//
// Errors: Unavailable when the store cannot be reached (retryable), FailedPrecondition for a
// compare-and-swap conflict or a watch on a compacted revision, NotFound for a missing key or
// lease, InvalidArgument for malformed arguments, Internal for replies that make no sense,
// ResourceExhausted for a reply larger than the implementation buffers.
//
// Thread-safety: implementations are thread-safe; any method may be called from any thread.
#ifndef CAIRN_MEMBERSHIP_COORDINATION_H_
#define CAIRN_MEMBERSHIP_COORDINATION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::membership {

// One stored key. Revisions are > 0 for a stored key.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease_id = 0;  // 0 = no lease.
};

// The result of a prefix read: the entries (sorted by key) and the store revision at which the
// read was taken, so a watch can continue from `revision + 1` without missing a change.
struct RangeResult {
  std::vector<KeyValue> entries;
  int64_t revision = 0;
};

enum class EventType { kPut, kDelete };

struct WatchEvent {
  EventType type = EventType::kPut;
  std::string key;
  std::string value;         // Empty for deletes.
  int64_t mod_revision = 0;  // The revision of the change (for deletes: the deleting revision).
};

// One delivery to a watch callback. An OK update carries >= 1 events. A non-OK update is final:
// the watch delivers nothing more (FailedPrecondition: start revision compacted, the caller must
// re-read with GetPrefix and watch again from the new revision).
struct WatchUpdate {
  Status status;
  std::vector<WatchEvent> events;
};

// Called on an implementation-owned thread, one call at a time per watch, in revision order.
// It must not destroy its own WatchHandle (that would wait for itself); it may call any
// Coordination method.
using WatchCallback = std::function<void(const WatchUpdate&)>;

// Owns a running watch. Destruction cancels it: when the destructor returns the callback is not
// running and will not be called again.
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
};

class Coordination {
 public:
  virtual ~Coordination() = default;

  // Stores `value` under `key`, attached to `lease_id` (0 = none; a key attached to a lease is
  // detached by a later put without one). Returns the new mod_revision.
  // NotFound if lease_id is not a live lease; Unavailable if the store is unreachable.
  virtual StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                                int64_t lease_id = 0) = 0;

  // Reads one key. NotFound if absent; Unavailable if unreachable.
  virtual StatusOr<KeyValue> Get(std::string_view key) = 0;

  // Reads every key starting with `prefix` (empty = all keys), sorted by key, plus the store
  // revision of the read. An empty result is OK. Unavailable if unreachable.
  virtual StatusOr<RangeResult> GetPrefix(std::string_view prefix) = 0;

  // Deletes `key`. Returns true if it existed (and the revision moved), false if it was absent.
  virtual StatusOr<bool> Delete(std::string_view key) = 0;

  // Atomically writes `value` (attached to `lease_id`, 0 = none) if the key's mod_revision equals
  // `expected_mod_revision`; 0 means "the key must not exist". Returns the new mod_revision.
  // FailedPrecondition if the key changed (someone else won the race: re-read and retry);
  // NotFound if lease_id is not a live lease; Unavailable if unreachable (the write may or may
  // not have happened: re-read before retrying).
  virtual StatusOr<int64_t> CompareAndSwap(std::string_view key, int64_t expected_mod_revision,
                                           std::string_view value, int64_t lease_id = 0) = 0;

  // Grants a lease that expires `ttl` after the last keep-alive. Returns its id (never 0).
  // InvalidArgument if ttl < 1 s; Unavailable if unreachable. etcd may round a short TTL up to its
  // minimum (about 1.5 election timeouts).
  virtual StatusOr<int64_t> GrantLease(std::chrono::seconds ttl) = 0;

  // Restarts the lease's TTL. NotFound if the lease expired or was revoked (its keys are gone:
  // re-register with a new lease); Unavailable if unreachable.
  virtual Status KeepAlive(int64_t lease_id) = 0;

  // Revokes the lease now, deleting its keys. NotFound if it is not a live lease.
  virtual Status RevokeLease(int64_t lease_id) = 0;

  // Watches every key starting with `prefix` from `start_revision` (0 = from now on). Returns once
  // the watch is established (so changes made after the return are seen). Unavailable if
  // unreachable; FailedPrecondition if start_revision is compacted (if compaction races with this
  // call, the watch instead delivers a final FailedPrecondition update). The handle owns the watch.
  virtual StatusOr<std::unique_ptr<WatchHandle>> Watch(std::string_view prefix,
                                                       int64_t start_revision,
                                                       WatchCallback callback) = 0;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_COORDINATION_H_
