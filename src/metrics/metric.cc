#include "metrics/metric.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace cairn::metrics {
namespace {

// Each thread sticks to one shard, handed out round-robin on its first Observe(), so a handful of
// hot reader threads land on distinct cache lines.
size_t ThisThreadShard(size_t shards) {
  static std::atomic<size_t> next_shard{0};
  thread_local const size_t assigned = next_shard.fetch_add(1, std::memory_order_relaxed);
  return assigned % shards;
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kUntyped:
      return "untyped";
  }
  return "untyped";
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::erase_if(bounds_, [](double b) { return !std::isfinite(b); });
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  const size_t cells = bounds_.size() + 2;  // Buckets incl. +Inf, then the sum.
  lines_per_shard_ = (cells + 7) / 8;
  // Value-initialised: every atomic starts at 0, which is also the bit pattern of 0.0.
  lines_ = std::make_unique<Line[]>(kShards * lines_per_shard_);
}

void Histogram::Observe(double value) {
  const size_t n = bounds_.size();
  size_t bucket;
  if (std::isnan(value)) {
    bucket = n;
  } else if (n <= 32) {
    // Branch-free count of bounds below the value: cheaper than a binary search's mispredicted
    // branches at typical bucket counts, and the compiler can vectorise it.
    bucket = 0;
    for (size_t i = 0; i < n; ++i) bucket += static_cast<size_t>(value > bounds_[i]);
  } else {
    bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                 bounds_.begin());
  }
  const size_t shard = ThisThreadShard(kShards);
  Cell(shard, bucket).fetch_add(1, std::memory_order_relaxed);

  // No atomic<double>::fetch_add on the bits: a CAS loop, nearly always one iteration because
  // the shard is (almost always) private to this thread.
  std::atomic<uint64_t>& sum = Cell(shard, n + 1);
  uint64_t old_bits = sum.load(std::memory_order_relaxed);
  while (!sum.compare_exchange_weak(
      old_bits, std::bit_cast<uint64_t>(std::bit_cast<double>(old_bits) + value),
      std::memory_order_relaxed, std::memory_order_relaxed)) {
  }
}

Histogram::Snapshot Histogram::Collect() const {
  const size_t n = bounds_.size();
  Snapshot snap;
  snap.bounds = bounds_;
  snap.cumulative.assign(n + 1, 0);
  for (size_t shard = 0; shard < kShards; ++shard) {
    for (size_t b = 0; b <= n; ++b) {
      snap.cumulative[b] += Cell(shard, b).load(std::memory_order_relaxed);
    }
    snap.sum += std::bit_cast<double>(Cell(shard, n + 1).load(std::memory_order_relaxed));
  }
  for (size_t b = 1; b <= n; ++b) snap.cumulative[b] += snap.cumulative[b - 1];
  // Derived from the buckets (not a separate cell) so that _count always equals the +Inf bucket,
  // as the exposition format requires, even while observations race the scrape.
  snap.count = snap.cumulative[n];
  return snap;
}

std::vector<double> LatencyBucketsSeconds() {
  // Literals rather than computed powers, so the le="..." labels print exactly.
  return {10e-6, 25e-6, 50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
          25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,    2.5,  5.0,    10.0};
}

std::vector<double> ExponentialBuckets(double start, double factor, size_t count) {
  std::vector<double> bounds;
  if (!(start > 0) || !(factor > 1) || !std::isfinite(start) || !std::isfinite(factor)) {
    return bounds;
  }
  double bound = start;
  for (size_t i = 0; i < count && std::isfinite(bound); ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

}  // namespace cairn::metrics
