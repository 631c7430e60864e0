// Backoff: jittered exponential delays between retries of the membership background threads
// (worker registration, prefix mirrors, mount-table compare-and-swap loops).
//
// Next() returns a delay drawn uniformly from [d/2, d], where d starts at `min` and doubles per
// call up to `max` ("equal jitter": never zero, so a retry loop cannot spin, and randomised, so a
// fleet of workers that lost etcd together does not come back in lockstep). Reset() after a
// success starts again from `min`.
//
// Thread-safety: not thread-safe; each retry loop owns its own Backoff.
#ifndef CAIRN_MEMBERSHIP_BACKOFF_H_
#define CAIRN_MEMBERSHIP_BACKOFF_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace cairn::membership {

class Backoff {
 public:
  // `min` is raised to 1 ms and `max` to `min` if given smaller.
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max)
      : min_(std::max<int64_t>(min.count(), 1)),
        max_(std::max<int64_t>(max.count(), min_)),
        current_(min_),
        rng_(std::random_device{}()) {}

  // The delay before the next retry; grows the following one.
  std::chrono::milliseconds Next() {
    const int64_t d = current_;
    current_ = std::min(max_, current_ * 2);
    ++attempts_;
    std::uniform_int_distribution<int64_t> jitter(d - d / 2, d);
    return std::chrono::milliseconds(jitter(rng_));
  }

  // Back to `min` (call after a success).
  void Reset() {
    current_ = min_;
    attempts_ = 0;
  }

  // Next() calls since the last Reset(): the failed attempts of the current outage.
  int64_t attempts() const { return attempts_; }

 private:
  const int64_t min_;
  const int64_t max_;
  int64_t current_;
  int64_t attempts_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_BACKOFF_H_
