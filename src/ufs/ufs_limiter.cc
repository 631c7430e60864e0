#include "ufs/ufs_limiter.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>

namespace cairn::ufs {
namespace {

constexpr uint64_t kMinBurstBytes = 1 << 20;  // One page: a 1 MiB read always fits.

std::atomic<uint64_t> g_next_sequence{1};

std::string LimiterLabel(const std::string& name) {
  return "ufs limiter '" + (name.empty() ? std::string("unnamed") : name) + "'";
}

}  // namespace

// --- Permit ---

UfsLimiter::Permit::Permit(Permit&& other) noexcept
    : limiter_(std::move(other.limiter_)), bytes_(other.bytes_) {
  other.limiter_ = nullptr;
  other.bytes_ = 0;
}

UfsLimiter::Permit& UfsLimiter::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    Reset();
    limiter_ = std::move(other.limiter_);
    bytes_ = other.bytes_;
    other.limiter_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

UfsLimiter::Permit::~Permit() { Reset(); }

void UfsLimiter::Permit::Reset() {
  if (limiter_ == nullptr) return;
  limiter_->Release();
  limiter_ = nullptr;
  bytes_ = 0;
}

void UfsLimiter::Permit::Refund(uint64_t unused_bytes) {
  if (limiter_ == nullptr) return;
  uint64_t n = std::min(unused_bytes, bytes_);
  if (n == 0) return;
  bytes_ -= n;
  limiter_->Refund(n);
}

// --- UfsLimiter ---

StatusOr<std::shared_ptr<UfsLimiter>> UfsLimiter::Create(LimiterOptions options) {
  const std::string label = LimiterLabel(options.name);
  if (options.clock == nullptr) return InvalidArgumentError(label + ": clock is null");
  if (options.max_concurrency < 0) {
    return InvalidArgumentError(label + ": max_concurrency must be >= 0 (0 = unlimited), got " +
                                std::to_string(options.max_concurrency));
  }
  if (options.successes_per_increase < 0) {
    return InvalidArgumentError(label + ": successes_per_increase must be >= 0, got " +
                                std::to_string(options.successes_per_increase));
  }
  if (options.decrease_interval.count() < 0) {
    return InvalidArgumentError(label + ": decrease_interval must not be negative");
  }
  // The constructor is private (only shared ownership makes sense for Permit), so no make_shared.
  return std::shared_ptr<UfsLimiter>(new UfsLimiter(std::move(options)));
}

UfsLimiter::UfsLimiter(LimiterOptions options)
    : options_(std::move(options)),
      rate_(static_cast<double>(options_.max_bytes_per_second) / 1e6),
      burst_(options_.max_bytes_per_second == 0
                 ? 0
                 : std::max(options_.max_bytes_per_second / 8, kMinBurstBytes)),
      sequence_(g_next_sequence.fetch_add(1, std::memory_order_relaxed)) {
  MutexLock lock(&mu_);
  tokens_ = static_cast<double>(burst_);  // Start full: an idle link may be used at once.
  last_refill_us_ = options_.clock->NowMicros();
  effective_limit_ = options_.max_concurrency;
}

void UfsLimiter::RefillLocked(int64_t now) {
  if (rate_ <= 0) return;
  int64_t elapsed = now - last_refill_us_;
  if (elapsed <= 0) return;
  tokens_ = std::min(static_cast<double>(burst_), tokens_ + static_cast<double>(elapsed) * rate_);
  last_refill_us_ = now;
}

bool UfsLimiter::SlotFreeLocked() const {
  return effective_limit_ == 0 || in_flight_ < effective_limit_;
}

bool UfsLimiter::BytesAvailableLocked(uint64_t bytes) const {
  if (rate_ <= 0 || bytes == 0) return true;
  // Over-burst requests need a full bucket and then leave it in debt (see the header).
  return tokens_ >= static_cast<double>(std::min(bytes, burst_));
}

void UfsLimiter::LeaveQueueLocked(std::list<uint64_t>::iterator ticket) {
  bool was_head = ticket == queue_.begin();
  queue_.erase(ticket);
  // Only a change of head matters to the others; everybody re-checks whether it is now first.
  if (was_head) cv_.NotifyAll();
}

Status UfsLimiter::TimeoutError(uint64_t bytes, std::chrono::milliseconds max_wait,
                                std::list<uint64_t>::const_iterator ticket) const {
  const std::string cap = effective_limit_ == 0 ? "unlimited" : std::to_string(effective_limit_);
  const std::string load = " (request cap " + cap + ", " + std::to_string(in_flight_) +
                           " in flight, " + std::to_string(queue_.size()) + " queued)";
  std::string what;
  if (ticket != queue_.cbegin()) {
    what = "still behind " + std::to_string(std::distance(queue_.cbegin(), ticket)) +
           " earlier request(s) after " + std::to_string(max_wait.count()) + " ms" + load;
  } else if (!BytesAvailableLocked(bytes)) {
    what = "no bandwidth for " + std::to_string(bytes) + " bytes at " +
           std::to_string(options_.max_bytes_per_second) + " B/s within " +
           std::to_string(max_wait.count()) + " ms";
  } else {
    what = "no request slot within " + std::to_string(max_wait.count()) + " ms" + load;
  }
  return DeadlineExceededError(LimiterLabel(options_.name) + ": " + what);
}

StatusOr<UfsLimiter::Permit> UfsLimiter::Acquire(uint64_t bytes,
                                                 std::chrono::milliseconds max_wait) {
  Clock* clock = options_.clock;
  const int64_t start = clock->NowMicros();
  const int64_t deadline = start + std::max<int64_t>(0, max_wait.count()) * 1000;
  bool waited = false;

  mu_.Lock();
  queue_.push_back(next_ticket_++);
  const auto ticket = std::prev(queue_.end());
  while (true) {
    const int64_t now = clock->NowMicros();
    if (queue_.begin() == ticket) {
      // Only the head competes, so nobody can take the slot or the tokens it is waiting for.
      RefillLocked(now);
      const bool slot_free = SlotFreeLocked();
      const bool bytes_available = BytesAvailableLocked(bytes);
      if (slot_free && bytes_available) {
        ++in_flight_;
        if (rate_ > 0) tokens_ -= static_cast<double>(bytes);
        stats_.bytes += bytes;
        ++stats_.acquired;
        if (waited) {
          ++stats_.waits;
          stats_.wait_micros_total += static_cast<uint64_t>(now - start);
        }
        LeaveQueueLocked(ticket);
        mu_.Unlock();
        return Permit(shared_from_this(), bytes);
      }
      waited = true;
      if (!bytes_available) {
        const double need = static_cast<double>(std::min(bytes, burst_)) - tokens_;
        const int64_t sleep_us =
            std::max<int64_t>(1, static_cast<int64_t>(std::ceil(need / rate_)));
        if (now + sleep_us > deadline) {
          // The bucket refills at a known rate: sleeping cannot make it in time, so fail now.
          Status error = TimeoutError(bytes, max_wait, ticket);
          ++stats_.deadline_exceeded;
          stats_.wait_micros_total += static_cast<uint64_t>(now - start);
          LeaveQueueLocked(ticket);
          mu_.Unlock();
          return error;
        }
        // Sleep without the lock (releases and refunds go on) and through the clock, so a
        // FakeClock advances instead of blocking the test.
        mu_.Unlock();
        clock->SleepForMicros(sleep_us);
        mu_.Lock();
        continue;
      }
    }
    waited = true;
    if (now >= deadline) {
      Status error = TimeoutError(bytes, max_wait, ticket);
      ++stats_.deadline_exceeded;
      stats_.wait_micros_total += static_cast<uint64_t>(now - start);
      LeaveQueueLocked(ticket);
      mu_.Unlock();
      return error;
    }
    // Wakes on a release, a change of head or a raised cap; the deadline is re-read from the
    // clock on every pass (a FakeClock moves only when someone advances it).
    cv_.WaitFor(&mu_, std::chrono::microseconds(deadline - now), [&]() NO_THREAD_SAFETY_ANALYSIS {
      return queue_.begin() == ticket && SlotFreeLocked();
    });
  }
}

void UfsLimiter::Release() {
  {
    MutexLock lock(&mu_);
    --in_flight_;
  }
  // Only the head can use the slot, but it may be asleep on the bucket rather than on cv_;
  // NotifyAll keeps this simple and the queue is short-lived.
  cv_.NotifyAll();
}

void UfsLimiter::Refund(uint64_t bytes) {
  MutexLock lock(&mu_);
  stats_.bytes -= std::min(stats_.bytes, bytes);
  if (rate_ > 0) {
    RefillLocked(options_.clock->NowMicros());
    tokens_ = std::min(static_cast<double>(burst_), tokens_ + static_cast<double>(bytes));
  }
}

void UfsLimiter::OnThrottled() {
  int before = 0;
  int after = 0;
  {
    MutexLock lock(&mu_);
    ++stats_.throttled_events;
    const int64_t now = options_.clock->NowMicros();
    const int64_t interval_us = options_.decrease_interval.count() * 1000;
    if (decreased_ever_ && now - last_decrease_us_ < interval_us) return;
    before = effective_limit_;
    if (effective_limit_ == 0) {
      // Unlimited so far: the in-flight count is the concurrency that provoked the push-back.
      const int provoking = std::max(1, in_flight_);
      effective_limit_ = std::max(1, provoking / 2);
      recovery_ceiling_ = provoking;
    } else {
      effective_limit_ = std::max(1, effective_limit_ / 2);
    }
    after = effective_limit_;
    decreased_ever_ = true;
    last_decrease_us_ = now;
    successes_since_change_ = 0;
  }
  // Logged outside the lock: acquirers should not wait on log I/O. Rare (once per interval).
  spdlog::info("{}: source throttled (SlowDown); request cap {} -> {}", LimiterLabel(options_.name),
               before == 0 ? "unlimited" : std::to_string(before), after);
}

void UfsLimiter::OnSuccess() {
  bool raised = false;
  {
    MutexLock lock(&mu_);
    if (effective_limit_ == 0) return;  // Unlimited: nothing to recover.
    if (options_.max_concurrency > 0 && effective_limit_ >= options_.max_concurrency) return;
    const int step =
        options_.successes_per_increase > 0 ? options_.successes_per_increase : effective_limit_;
    if (++successes_since_change_ < step) return;
    successes_since_change_ = 0;
    ++effective_limit_;
    if (options_.max_concurrency == 0 && effective_limit_ >= recovery_ceiling_) {
      effective_limit_ = 0;  // Back where the push-back started: lift the cap again.
      recovery_ceiling_ = 0;
    }
    raised = true;
  }
  if (raised) cv_.NotifyAll();
}

LimiterStats UfsLimiter::stats() const {
  MutexLock lock(&mu_);
  LimiterStats s = stats_;
  s.in_flight = in_flight_;
  s.queued = static_cast<int>(queue_.size());
  s.effective_limit = effective_limit_;
  return s;
}

}  // namespace cairn::ufs
