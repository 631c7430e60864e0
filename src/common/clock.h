// Clock: the seam for time, so TTLs, deadlines and backoff are testable with a fake clock.
// Thread-safety: all implementations are thread-safe.
#ifndef CAIRN_COMMON_CLOCK_H_
#define CAIRN_COMMON_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cairn {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic microseconds (arbitrary epoch); never goes backwards.
  virtual int64_t NowMicros() const = 0;
  // Wall-clock nanoseconds since the Unix epoch.
  virtual int64_t WallNanos() const = 0;
  virtual void SleepForMicros(int64_t micros) = 0;

  // The process-wide real clock (never null, never destroyed).
  static Clock* Real();
};

// A clock that only moves when told; SleepForMicros advances it.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_micros = 1'000'000) : now_(start_micros) {}
  int64_t NowMicros() const override { return now_.load(); }
  int64_t WallNanos() const override { return now_.load() * 1000; }
  void SleepForMicros(int64_t micros) override { now_ += micros; }
  void Advance(std::chrono::microseconds d) { now_ += d.count(); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace cairn

#endif  // CAIRN_COMMON_CLOCK_H_
