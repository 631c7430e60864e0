// The metric value types a Registry hands out: Counter, Gauge, Histogram.
//
// They sit on hot paths (every page read observes a latency), so updates are lock-free:
// counters and gauges are one relaxed atomic; a histogram spreads its cells over cache-line-padded
// shards picked per thread, so concurrent Observe() calls from different threads rarely share a
// cache line. Reads (value(), Collect()) are for scrapes and tests: they see each update whole but
// are not a consistent cut across cells (a Collect() racing an Observe() may count the observation
// in its bucket but not yet in the sum), which is what Prometheus expects from a live process.
//
// Thread-safety: every method of every type here is safe to call concurrently.
#ifndef CAIRN_METRICS_METRIC_H_
#define CAIRN_METRICS_METRIC_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cairn::metrics {

// Label name/value pairs of one series, e.g. {{"op", "read"}, {"status", "ok"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram, kUntyped };

// "counter", "gauge", "histogram", "untyped": the TYPE keyword of the text format.
const char* MetricTypeName(MetricType type);

// A monotonically increasing count (requests, bytes, errors). Starts at 0.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment(uint64_t delta = 1) { value_.fetch_add(delta, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down (queue depth, open connections, bytes in use). Starts at 0.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Sub(double delta) { value_.fetch_sub(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A distribution over fixed buckets with Prometheus semantics: a value v falls in the first bucket
// whose upper bound b satisfies v <= b, or in the implicit +Inf bucket; NaN goes to +Inf (and makes
// the sum NaN). Observe() costs a bucket search and two uncontended atomic updates (~10-20 ns).
class Histogram {
 public:
  // `bounds` are the bucket upper bounds. Registry::AddHistogram rejects bounds that are not
  // finite and strictly increasing; this constructor, for direct use, instead sorts them and drops
  // duplicates and non-finite values (+Inf is always implicit), so it never fails.
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double value);
  // Records a duration in seconds, the Prometheus base unit.
  template <typename Rep, typename Period>
  void ObserveDuration(std::chrono::duration<Rep, Period> d) {
    Observe(std::chrono::duration<double>(d).count());
  }

  struct Snapshot {
    std::vector<double> bounds;        // Finite upper bounds, increasing.
    std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries; the last is the +Inf bucket.
    uint64_t count = 0;                // == cumulative.back().
    double sum = 0;
  };
  // Sums all shards. Safe concurrently with Observe() (see the file comment on consistency).
  Snapshot Collect() const;

  const std::vector<double>& bounds() const { return bounds_; }

 private:
  // One cache line of cells; shards start on a line boundary so two shards never share one.
  struct alignas(64) Line {
    std::atomic<uint64_t> cells[8];
  };
  static constexpr size_t kShards = 16;

  std::atomic<uint64_t>& Cell(size_t shard, size_t index) const {
    const size_t flat = shard * lines_per_shard_ * 8 + index;
    return lines_[flat / 8].cells[flat % 8];
  }

  std::vector<double> bounds_;
  // Per shard: bounds_.size() + 1 bucket counts (non-cumulative), then the sum as double bits.
  size_t lines_per_shard_;
  std::unique_ptr<Line[]> lines_;
};

// Default latency buckets in seconds: 1-2.5-5 steps from 10 us to 10 s (19 bounds).
std::vector<double> LatencyBucketsSeconds();

// `count` bounds start, start*factor, ... (e.g. sizes: ExponentialBuckets(4096, 4, 8)). Returns
// an empty vector unless start > 0, factor > 1 and count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, size_t count);

}  // namespace cairn::metrics

#endif  // CAIRN_METRICS_METRIC_H_
