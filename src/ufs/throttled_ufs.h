// ThrottledUnderStorage: applies UfsLimiters (ufs_limiter.h) to every call on the storage it wraps,
// so a worker stays under its caps on concurrent requests and bytes per second to the source.
//
// Every call takes one permit from each limiter (the worker-wide one and the mount's own, say) and
// holds them all for the duration of the inner call. Bytes charged: Read out.size() (the short part
// of a read that hits the end of the object is refunded afterwards), a writer's WritePart its
// part's size and Commit its final part's size, Stat, List, Delete and Abort 0. A call whose
// permits do not all come within `max_wait` returns the limiter's DeadlineExceeded without reaching
// the source, and holds nothing.
//
// Deadlock freedom: limiters are acquired in decreasing UfsLimiter::sequence() (latest created
// first), a single order shared by every ThrottledUnderStorage in the process, whatever order the
// constructor was given. Since per-mount limiters are normally created after the worker-wide one,
// the narrower mount slot is taken first and a call waiting for its mount does not sit on a
// worker-wide slot that other mounts could use.
//
// Feedback: an inner Unavailable that says the source pushed back (IsThrottled: S3 SlowDown, HTTP
// 503 or 429, as s3_errors.cc words them) calls OnThrottled() on every limiter, while the permits
// are still held; a success, or a definitive answer such as NotFound or FailedPrecondition, calls
// OnSuccess(); other transient failures (connection refused, timeouts) call neither.
//
// Where it goes in a stack: below RetryingUnderStorage, i.e. Retrying(Throttled(S3)), so each
// attempt takes its own permits, backoff sleeps hold none, and every SlowDown reaches the limiters.
// Note that one Read is one request here even if the S3 store below splits it into parallel ranged
// GETs (s3_parallel_read.cc); its bytes are charged in full.
//
// Thread-safety: safe for concurrent use (all state is in the limiters).
#ifndef CAIRN_UFS_THROTTLED_UFS_H_
#define CAIRN_UFS_THROTTLED_UFS_H_

#include <chrono>
#include <memory>
#include <vector>

#include "common/status.h"
#include "ufs/ufs.h"
#include "ufs/ufs_limiter.h"

namespace cairn::ufs {

// True if `status` is an Unavailable that reports push-back from the source on the request rate:
// S3 "SlowDown", "HTTP 503" or "HTTP 429" in the message (see s3_errors.h for the wording).
bool IsThrottled(const Status& status);

class ThrottledUnderStorage : public UnderStorageWrapper {
 public:
  // Shares ownership of `target` and of the limiters (which are typically shared with other
  // ThrottledUnderStorage instances: one worker-wide limiter for all mounts). Null and repeated
  // limiters are ignored; with none left the wrapper is a pass-through. `max_wait` bounds the
  // time one call spends waiting for all its permits together, measured on the clock of the
  // first limiter acquired (limiters stacked together should share a clock).
  ThrottledUnderStorage(std::shared_ptr<UnderStorage> target,
                        std::vector<std::shared_ptr<UfsLimiter>> limiters,
                        std::chrono::milliseconds max_wait = std::chrono::seconds(30));

  // Each forwards to the target under the permits described above; errors are the target's, or
  // DeadlineExceeded from a limiter (the target was not called).
  StatusOr<ObjectInfo> Stat(std::string_view key) override;
  StatusOr<ListResult> List(const ListOptions& options) override;
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override;
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;
  Status Delete(std::string_view key) override;
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override;
  Status MakeDir(std::string_view key) override;
  Status RemoveDir(std::string_view key) override;

  // The limiters in acquisition order.
  const std::vector<std::shared_ptr<UfsLimiter>>& limiters() const { return limiters_; }

 private:
  class Writer;

  // One permit per limiter, in acquisition order; on failure releases what it took.
  StatusOr<std::vector<UfsLimiter::Permit>> AcquireAll(uint64_t bytes);
  // Feeds the outcome of the inner call to the limiters (AIMD), permits still held.
  void Report(const Status& status);

  const std::vector<std::shared_ptr<UfsLimiter>> limiters_;
  const std::chrono::milliseconds max_wait_;
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_THROTTLED_UFS_H_
