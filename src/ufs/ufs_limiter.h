// UfsLimiter: caps how hard Cairn pushes on the under-storage: concurrent requests and bytes per
// second, with SlowDown-driven adaptation of the request cap. One limiter is shared by every
// caller that must stay under the same cap (a worker-wide limiter for the shared link, one per
// mount for the mount's bucket); ThrottledUnderStorage (throttled_ufs.h) applies them to UFS
// calls. See docs/ufs.md, "Protecting the source", for how to size the caps.
//
// Admission. Acquire(bytes, max_wait) waits until (a) fewer than effective_limit requests hold a
// permit and (b) the token bucket has `bytes` of budget, then takes both at once. Waiters are
// served strictly in arrival order (a FIFO queue; only its head competes for slots and bytes), so a
// big read cannot be starved by a stream of small ones, at the price of small requests queueing
// behind a big one that waits for bandwidth.
//
// Token bucket. Refills at max_bytes_per_second up to a burst of max(rate / 8, 1 MiB): a 1 MiB page
// read always fits a full bucket, and at most ~1/8 s of link capacity can be spent above the rate.
// A request larger than the burst is admitted once the bucket is full and leaves it in debt; the
// debt delays later requests, so the long-run rate still holds. Requests of 0 bytes (metadata) do
// not wait for bandwidth. When the bucket is short, the head of the queue computes the exact wait
// and sleeps through the injected Clock (so FakeClock tests take no real time); if that wait alone
// would pass the deadline it fails at once instead of sleeping in vain.
//
// SlowDown adaptation (AIMD). OnThrottled() (the source answered SlowDown / 503 / 429) halves the
// effective request cap, not below 1; further throttle events within `decrease_interval` of the
// last halving are counted but do not halve again (the requests already in flight when the source
// pushed back all report it; one push-back is one signal). OnSuccess() adds one to the cap after
// every `successes_per_increase` successes (0 = after as many successes as the current cap, i.e.
// about one step per round trip, as TCP congestion avoidance), up to max_concurrency.
// With max_concurrency == 0 (unlimited) the first throttle event starts a cap at half the requests
// in flight at that moment (at least 1) and remembers that in-flight count as the level that
// provoked the push-back; once additive increase climbs back to that level the cap is lifted again
// (unlimited) until the next throttle event.
//
// Thread-safety: every method is safe to call concurrently. A Permit may be released on any thread.
// Lifetime: a Permit keeps its limiter alive (shared ownership), so permits may outlive the code
// that created the limiter.
#ifndef CAIRN_UFS_UFS_LIMITER_H_
#define CAIRN_UFS_UFS_LIMITER_H_

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace cairn::ufs {

struct LimiterOptions {
  // Requests holding a permit at once; 0 = unlimited (until a throttle event, see above).
  int max_concurrency = 0;
  // Budget of the token bucket; 0 = unlimited.
  uint64_t max_bytes_per_second = 0;
  // Time source for the bucket, waits and the decrease interval. Not owned; must outlive the
  // limiter. Never null.
  Clock* clock = Clock::Real();
  // Shown in error messages and logs ("worker", "mount imagenet").
  std::string name;
  // AIMD: successes per +1 of the cap; 0 = the current cap (one step per window).
  int successes_per_increase = 0;
  // AIMD: throttle events closer than this to the last halving do not halve again.
  std::chrono::milliseconds decrease_interval{1000};
};

// A snapshot; counters are cumulative since Create.
struct LimiterStats {
  int in_flight = 0;               // Permits currently held.
  int queued = 0;                  // Acquire calls waiting now.
  uint64_t acquired = 0;           // Successful Acquire calls.
  uint64_t waits = 0;              // Acquires that could not be granted on arrival.
  uint64_t wait_micros_total = 0;  // Time spent waiting by successful and failed acquires.
  uint64_t deadline_exceeded = 0;  // Acquires that gave up after max_wait.
  uint64_t throttled_events = 0;   // OnThrottled calls (halving or not).
  int effective_limit = 0;         // Current request cap; 0 = unlimited.
  uint64_t bytes = 0;              // Bytes granted, minus bytes handed back with Permit::Refund.
};

class UfsLimiter : public std::enable_shared_from_this<UfsLimiter> {
 public:
  // Holds one request slot and the bytes charged for it; destroying (or moving from and destroying
  // the target of) a Permit frees the slot and wakes waiters. Move-only. Not thread-safe itself:
  // one owner at a time.
  class Permit {
   public:
    Permit() = default;
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit();

    // Returns up to `unused_bytes` of what this permit was charged to the bucket (a read that
    // came back short). The bucket never refills beyond its burst. No-op on an empty permit.
    void Refund(uint64_t unused_bytes);
    // True while it holds a slot (false once moved from or default-constructed).
    bool valid() const { return limiter_ != nullptr; }

   private:
    friend class UfsLimiter;
    Permit(std::shared_ptr<UfsLimiter> limiter, uint64_t bytes)
        : limiter_(std::move(limiter)), bytes_(bytes) {}
    void Reset();

    std::shared_ptr<UfsLimiter> limiter_;
    uint64_t bytes_ = 0;  // Still refundable.
  };

  // InvalidArgument for a negative max_concurrency or successes_per_increase, a negative
  // decrease_interval, or a null clock. The caller shares ownership of the result.
  static StatusOr<std::shared_ptr<UfsLimiter>> Create(LimiterOptions options);

  UfsLimiter(const UfsLimiter&) = delete;
  UfsLimiter& operator=(const UfsLimiter&) = delete;

  // Blocks until a request slot is free and `bytes` of budget are available (0 for metadata
  // calls), then returns a Permit holding both. DeadlineExceeded (naming the limiter and what it
  // waited for) if that would take longer than `max_wait` (measured on the limiter's clock;
  // max_wait <= 0 means "only if available now"); nothing is held then.
  StatusOr<Permit> Acquire(uint64_t bytes, std::chrono::milliseconds max_wait) EXCLUDES(mu_);

  // The source pushed back (SlowDown, 503, 429) on a request made under this limiter: halve the
  // cap (see the file comment). Call it while the permit of that request is still held, so the
  // in-flight count includes it.
  void OnThrottled() EXCLUDES(mu_);
  // A request made under this limiter completed without push-back; may raise the cap by one.
  void OnSuccess() EXCLUDES(mu_);

  LimiterStats stats() const EXCLUDES(mu_);
  const std::string& name() const { return options_.name; }
  Clock* clock() const { return options_.clock; }
  // Burst of the token bucket in bytes (0 when bandwidth is unlimited).
  uint64_t burst_bytes() const { return burst_; }
  // Order of creation, unique per process; ThrottledUnderStorage acquires limiters in decreasing
  // sequence so that every caller takes them in the same order.
  uint64_t sequence() const { return sequence_; }

 private:
  explicit UfsLimiter(LimiterOptions options);

  void Release() EXCLUDES(mu_);
  void Refund(uint64_t bytes) EXCLUDES(mu_);
  // Adds the tokens accrued since the last refill (capped at the burst).
  void RefillLocked(int64_t now) REQUIRES(mu_);
  bool SlotFreeLocked() const REQUIRES(mu_);
  bool BytesAvailableLocked(uint64_t bytes) const REQUIRES(mu_);
  // Removes `ticket` from the queue and wakes the others (the head may have changed).
  void LeaveQueueLocked(std::list<uint64_t>::iterator ticket) REQUIRES(mu_);
  // DeadlineExceeded saying what `ticket`'s acquirer was still waiting for.
  Status TimeoutError(uint64_t bytes, std::chrono::milliseconds max_wait,
                      std::list<uint64_t>::const_iterator ticket) const REQUIRES(mu_);

  const LimiterOptions options_;
  const double rate_;     // Bytes per microsecond; 0 = unlimited.
  const uint64_t burst_;  // Bucket capacity in bytes; 0 when unlimited.
  const uint64_t sequence_;

  mutable Mutex mu_;
  CondVar cv_;  // Signalled when a slot frees, the queue head changes, or the cap grows.
  std::list<uint64_t> queue_ GUARDED_BY(mu_);  // Tickets of waiting acquirers, oldest first.
  uint64_t next_ticket_ GUARDED_BY(mu_) = 0;
  double tokens_ GUARDED_BY(mu_) = 0;  // May be negative (debt after an over-burst request).
  int64_t last_refill_us_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;
  int effective_limit_ GUARDED_BY(mu_) = 0;   // 0 = unlimited.
  int recovery_ceiling_ GUARDED_BY(mu_) = 0;  // Where the cap is lifted when max_concurrency == 0.
  int successes_since_change_ GUARDED_BY(mu_) = 0;
  int64_t last_decrease_us_ GUARDED_BY(mu_) = 0;
  bool decreased_ever_ GUARDED_BY(mu_) = false;
  LimiterStats stats_ GUARDED_BY(mu_);  // in_flight, queued, effective_limit: set by stats().
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_UFS_LIMITER_H_
