// PrefixMirror: a live, last-known copy of every key under a prefix of the coordination store
// (the worker list, the mount table), kept by a background thread.
//
// The thread lists the prefix (GetPrefix), then watches it from the list's revision + 1, so no
// change between the two is missed, and applies each event to its copy. It calls on_change after
// the first successful list and after every change of the copy (not for events that leave it as
// it was, such as a put of an identical value).
//
// Failures never lose the copy: when the store cannot be reached, or the watch ends
// (FailedPrecondition after a compaction, or any other final update), the mirror keeps serving
// the last snapshot, retries with jittered backoff (retry_min..retry_max) and lists again,
// calling on_change only if the new list differs. EtcdCoordination's watches reconnect silently
// while etcd is down, so the mirror also probes the store (a Get of the prefix) every
// probe_interval, and more often while it is unreachable, to keep connected() honest. Outages
// are logged once when they start and once when they end.
//
// Thread-safety: all methods are thread-safe. on_change runs on the mirror's thread, one call at
// a time, without any mirror lock held: it may call snapshot()/connected() and the Coordination,
// but must not destroy the mirror (the destructor waits for the thread).
#ifndef CAIRN_MEMBERSHIP_PREFIX_MIRROR_H_
#define CAIRN_MEMBERSHIP_PREFIX_MIRROR_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "membership/backoff.h"
#include "membership/coordination.h"

namespace cairn::membership {

struct MirrorOptions {
  // Backoff between attempts while the store cannot be reached or the watch keeps failing.
  std::chrono::milliseconds retry_min{200};
  std::chrono::milliseconds retry_max{5000};
  // How often a healthy mirror checks that the store still answers.
  std::chrono::milliseconds probe_interval{2000};
};

class PrefixMirror {
 public:
  using Snapshot = std::map<std::string, std::string>;  // Full key -> value.
  using Callback = std::function<void(const Snapshot&)>;

  // Starts the background thread and returns at once; a store that is down now is not an error
  // (the mirror syncs when it comes back). `coord` is borrowed and must outlive the mirror and
  // must not be null. `on_change` may be empty. Non-positive option values are raised to 1 ms.
  static std::unique_ptr<PrefixMirror> Start(Coordination* coord, std::string prefix,
                                             Callback on_change, MirrorOptions options = {});

  // Stops the thread. When it returns, on_change is not running and will not be called again.
  // Waits for a Coordination call in flight (bounded by the Coordination's request timeout) and
  // for an on_change call in progress.
  ~PrefixMirror();
  PrefixMirror(const PrefixMirror&) = delete;
  PrefixMirror& operator=(const PrefixMirror&) = delete;

  // Blocks up to `timeout` until a first list has succeeded and its on_change call has
  // returned. Returns whether that has happened.
  bool WaitForSync(std::chrono::milliseconds timeout);

  // A copy of the last known contents (empty before the first sync).
  Snapshot snapshot() const;

  // Whether the store answered recently: false before the first answer and after a failed list
  // or probe, true after a successful one.
  bool connected() const;

  // Successful lists after the first (re-syncs after a failed watch).
  uint64_t resyncs() const;

 private:
  enum class FollowEnd { kStopping, kRelist };

  PrefixMirror(Coordination* coord, std::string prefix, Callback on_change, MirrorOptions options);

  void Run();
  // Watches from `revision` + 1 and applies events until the watch ends or Stop; `status` gets
  // the reason a re-list is needed.
  FollowEnd Follow(int64_t revision, Snapshot snap, Backoff* backoff, Status* status);
  // Stores `snap` and calls on_change if it differs from the current copy or `force`.
  void Publish(const Snapshot& snap, bool force);
  // Checks that the store answers; updates connected(). Returns whether it did.
  bool Probe();
  void SetConnected(bool connected, const Status& why);
  bool SleepUnlessStopped(std::chrono::milliseconds d) EXCLUDES(mu_);
  bool stopping() const EXCLUDES(mu_);

  Coordination* const coord_;
  const std::string prefix_;
  const Callback on_change_;
  const MirrorOptions options_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool synced_ GUARDED_BY(mu_) = false;
  bool connected_ GUARDED_BY(mu_) = false;
  uint64_t resyncs_ GUARDED_BY(mu_) = 0;
  Snapshot snapshot_ GUARDED_BY(mu_);
  // Updates of the current watch, filled by its callback, drained by the mirror's thread.
  std::deque<WatchUpdate> pending_ GUARDED_BY(mu_);
  bool outage_logged_ = false;  // Touched only by the mirror's thread.
  std::thread thread_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_PREFIX_MIRROR_H_
