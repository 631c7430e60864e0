#include "metrics/metric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

namespace cairn::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kPerThread = 100'000;

template <typename Fn>
void RunThreads(Fn fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(fn, t);
  for (std::thread& thread : threads) thread.join();
}

TEST(CounterTest, ConcurrentIncrementsAreAllCounted) {
  Counter counter;
  RunThreads([&](int) {
    for (int i = 0; i < kPerThread; ++i) counter.Increment();
  });
  counter.Increment(5);
  EXPECT_EQ(counter.value(), uint64_t{kThreads} * kPerThread + 5);
}

TEST(GaugeTest, SetAddSub) {
  Gauge gauge;
  EXPECT_EQ(gauge.value(), 0.0);
  gauge.Set(10.5);
  gauge.Add(2);
  gauge.Sub(0.5);
  EXPECT_EQ(gauge.value(), 12.0);
}

TEST(GaugeTest, ConcurrentAddsAreAllCounted) {
  Gauge gauge;
  RunThreads([&](int t) {
    for (int i = 0; i < kPerThread; ++i) t % 2 == 0 ? gauge.Add(3) : gauge.Sub(1);
  });
  EXPECT_EQ(gauge.value(), (kThreads / 2) * kPerThread * 2.0);
}

TEST(HistogramTest, BucketsAreUpperInclusiveAndCumulative) {
  Histogram histogram({1, 2, 5});
  for (double v : {-3.0, 0.5, 1.0, 1.5, 2.0, 4.0, 5.0, 7.0, 1e300}) histogram.Observe(v);
  const Histogram::Snapshot snap = histogram.Collect();
  EXPECT_EQ(snap.bounds, (std::vector<double>{1, 2, 5}));
  // le=1: -3, 0.5, 1 | le=2: +1.5, 2 | le=5: +4, 5 | +Inf: +7, 1e300
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{3, 5, 7, 9}));
  EXPECT_EQ(snap.count, 9u);
  EXPECT_DOUBLE_EQ(snap.sum, -3 + 0.5 + 1 + 1.5 + 2 + 4 + 5 + 7 + 1e300);
}

TEST(HistogramTest, NanGoesToInfBucket) {
  Histogram histogram({1});
  histogram.Observe(NAN);
  const Histogram::Snapshot snap = histogram.Collect();
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{0, 1}));
  EXPECT_TRUE(std::isnan(snap.sum));
}

TEST(HistogramTest, ManyBoundsUseBinarySearchCorrectly) {
  std::vector<double> bounds;
  for (int i = 1; i <= 100; ++i) bounds.push_back(i);
  Histogram histogram(bounds);
  for (int i = 0; i <= 101; ++i) histogram.Observe(i);  // 0 and 1 land in le=1; 101 in +Inf.
  const Histogram::Snapshot snap = histogram.Collect();
  ASSERT_EQ(snap.cumulative.size(), 101u);
  EXPECT_EQ(snap.cumulative[0], 2u);
  EXPECT_EQ(snap.cumulative[49], 51u);  // le=50: 0..50
  EXPECT_EQ(snap.cumulative[99], 101u);
  EXPECT_EQ(snap.cumulative[100], 102u);
}

TEST(HistogramTest, ConstructorNormalisesBounds) {
  Histogram histogram({5, 1, INFINITY, 1, NAN, 2});
  EXPECT_EQ(histogram.bounds(), (std::vector<double>{1, 2, 5}));
  Histogram empty({});
  empty.Observe(3);
  EXPECT_EQ(empty.Collect().cumulative, (std::vector<uint64_t>{1}));
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  Histogram histogram(LatencyBucketsSeconds());
  RunThreads([&](int t) {
    // Exactly representable values so the sum is exact whatever the order.
    for (int i = 0; i < kPerThread; ++i) histogram.Observe(t % 2 == 0 ? 0.5 : 2.0);
  });
  const Histogram::Snapshot snap = histogram.Collect();
  EXPECT_EQ(snap.count, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(snap.sum, (kThreads / 2) * kPerThread * 2.5);
  // le=0.5 is index 14, le=1 index 15 (excludes 2.0), le=2.5 index 16.
  EXPECT_EQ(snap.cumulative[13], 0u);
  EXPECT_EQ(snap.cumulative[14], uint64_t{kThreads / 2} * kPerThread);
  EXPECT_EQ(snap.cumulative[15], uint64_t{kThreads / 2} * kPerThread);
  EXPECT_EQ(snap.cumulative[16], uint64_t{kThreads} * kPerThread);
}

TEST(HistogramTest, ObserveDurationRecordsSeconds) {
  Histogram histogram({0.001, 0.01});
  histogram.ObserveDuration(std::chrono::microseconds(1500));
  const Histogram::Snapshot snap = histogram.Collect();
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{0, 1, 1}));
  EXPECT_DOUBLE_EQ(snap.sum, 0.0015);
}

TEST(BucketsTest, LatencyBucketsSpanTenMicrosToTenSeconds) {
  const std::vector<double> bounds = LatencyBucketsSeconds();
  ASSERT_EQ(bounds.size(), 19u);
  EXPECT_EQ(bounds.front(), 10e-6);
  EXPECT_EQ(bounds.back(), 10.0);
  for (size_t i = 1; i < bounds.size(); ++i) EXPECT_LT(bounds[i - 1], bounds[i]);
}

TEST(BucketsTest, ExponentialBuckets) {
  EXPECT_EQ(ExponentialBuckets(4096, 4, 4), (std::vector<double>{4096, 16384, 65536, 262144}));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());
  EXPECT_EQ(ExponentialBuckets(1e300, 1e10, 5).size(), 1u);  // Stops before overflowing to inf.
}

}  // namespace
}  // namespace cairn::metrics
