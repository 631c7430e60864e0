// RetryingUnderStorage: retries transient failures of the storage it wraps.
//
// Only Unavailable and DeadlineExceeded are retried; every other code (NotFound, PermissionDenied,
// FailedPrecondition, ...) is final and returned at once. Backoff before retry k (k = 0, 1, ...)
// is drawn uniformly from [0, min(max_backoff, base_backoff * 2^k)] ("full jitter", which spreads
// a burst of clients hitting a throttled endpoint), and retrying stops after max_retries retries
// or once the time since the first attempt plus the next sleep would pass max_elapsed. All
// operations are idempotent (a part written again replaces itself; a Commit repeated after a lost
// reply is recognised by the store where it can tell, see ObjectWriter), so retrying is safe; one
// special case: a Delete whose earlier attempt failed transiently and whose retry finds the object
// gone returns OK, since the lost attempt most likely deleted it. Likewise a MakeDir retry that
// finds the directory (AlreadyExists), a RemoveDir retry that finds none (NotFound), and a
// Rename retry that finds no source: then the destination's Stat is the answer.
//
// Time comes from an injected Clock, so tests with FakeClock run instantly and can check the
// sleeps. Thread-safety: safe for concurrent use (the jitter RNG is behind a mutex).
#ifndef CAIRN_UFS_RETRYING_UFS_H_
#define CAIRN_UFS_RETRYING_UFS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

struct RetryOptions {
  int max_retries = 5;                  // Retries after the first attempt (0 = no retry).
  int64_t base_backoff_us = 50'000;     // 50 ms.
  int64_t max_backoff_us = 5'000'000;   // Cap of one sleep: 5 s.
  int64_t max_elapsed_us = 60'000'000;  // Give up rather than sleep past this since the start.
  uint64_t seed = 0;                    // Jitter RNG seed; 0 = from std::random_device.
};

// True for the codes worth retrying: Unavailable and DeadlineExceeded.
bool IsRetryable(const Status& status);

class RetryingUnderStorage : public UnderStorageWrapper {
 public:
  // `clock` is not owned and must outlive this object.
  RetryingUnderStorage(std::shared_ptr<UnderStorage> target, RetryOptions options,
                       Clock* clock = Clock::Real());

  StatusOr<ObjectInfo> Stat(std::string_view key) override;
  StatusOr<ListResult> List(const ListOptions& options) override;
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override;
  // The writer retries WritePart, Commit and Abort (all safe to repeat; see ObjectWriter). A
  // Commit that fails after an attempt that may have landed is marked outcome_unknown(), whatever
  // the last attempt's failure.
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;
  Status Delete(std::string_view key) override;
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override;
  Status MakeDir(std::string_view key) override;
  Status RemoveDir(std::string_view key) override;

  // Retries performed so far (not counting first attempts), across all operations.
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }

 private:
  class Writer;

  // Runs `attempt` until it returns a non-retryable status or the budget is spent. The final
  // error keeps its code and gains "giving up after N attempt(s)" context.
  Status Run(const std::function<Status()>& attempt);
  int64_t NextBackoffMicros(int retry) EXCLUDES(mu_);

  const RetryOptions options_;
  Clock* const clock_;
  Mutex mu_;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  std::atomic<uint64_t> retries_{0};
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_RETRYING_UFS_H_
