// PeerPending: the files that other workers of the cluster hold closed and not yet uploaded
// under a directory of a write-back mount (docs/write-path.md, decision 7). A write-back file
// waits at the owner of its own path, and a listing is answered by the owner of the directory:
// without asking the others, `ls` would miss a file for the time of its upload. ChildrenUnder
// asks every other worker at once (protocol ListPending, answered from memory) and merges what
// they say.
//
// A peer that fails or does not answer within the timeout is left out (its files show once
// uploaded, as before) and is not asked again for kQuietAfterFailure, so that a frozen worker
// costs one timeout per period, not one per listing or per lookup of a new name.
//
// Thread-safety: thread-safe.
#ifndef CAIRN_WORKER_PEER_PENDING_H_
#define CAIRN_WORKER_PEER_PENDING_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "metrics/metric.h"
#include "protocol/wire.h"
#include "worker/peer_set.h"

namespace cairn::worker {

class PeerPending {
 public:
  static constexpr std::chrono::seconds kQuietAfterFailure{10};
  static constexpr const char* kFailuresMetric = "cairn_worker_peer_pending_failures_total";
  static constexpr const char* kFailuresHelp =
      "Other workers left out of a listing's pending files (failed, timed out, or resting "
      "after a failure): their files not yet uploaded were missing from it";

  // `peers`, `clock`, `failures` (may be null): not owned; must outlive this. `timeout`: how
  // long a question may wait for the slowest peer.
  PeerPending(const PeerSet* peers, std::chrono::milliseconds timeout, Clock* clock,
              metrics::Counter* failures = nullptr)
      : peers_(peers), timeout_(timeout), clock_(clock), failures_metric_(failures) {}

  // The children of directory `dir` (a namespace path) that hold other workers' pending files,
  // as ListPending answers them (a file as a file entry, a folder as a directory entry), in no
  // particular order; a name may come from several workers.
  std::vector<protocol::DirEntry> ChildrenUnder(const std::string& dir) EXCLUDES(mu_);

  // Peers left out of the answers so far (failed, timed out, or quiet after a failure).
  uint64_t failures() const EXCLUDES(mu_);

 private:
  const PeerSet* const peers_;
  const std::chrono::milliseconds timeout_;
  Clock* const clock_;
  metrics::Counter* const failures_metric_;
  mutable Mutex mu_;
  std::map<std::string, int64_t> quiet_until_us_ GUARDED_BY(mu_);  // By peer id.
  uint64_t failures_ GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_PEER_PENDING_H_
