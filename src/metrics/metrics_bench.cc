// Hot-path cost of metric updates, single-threaded and with threads contending.
// Run: build/src/metrics/metrics_bench
#include <benchmark/benchmark.h>

#include "metrics/registry.h"

namespace cairn::metrics {
namespace {

Registry& SharedRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

void BM_CounterIncrement(benchmark::State& state) {
  Counter* counter = SharedRegistry().AddCounter("bench_total", "Bench.");
  for (auto _ : state) counter->Increment();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterIncrement)->Threads(1)->Threads(4);

void BM_HistogramObserve(benchmark::State& state) {
  Histogram* histogram =
      SharedRegistry().AddHistogram("bench_seconds", "Bench.", LatencyBucketsSeconds());
  double value = 1e-6;
  for (auto _ : state) {
    histogram->Observe(value);
    value = value < 20 ? value * 1.7 : 1e-6;  // Walk all buckets.
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(4);

void BM_ExposeText(benchmark::State& state) {
  Registry registry;
  for (int i = 0; i < 50; ++i) {
    registry.AddHistogram("h_seconds", "H.", LatencyBucketsSeconds(), {{"op", std::to_string(i)}});
    registry.AddCounter("c_total", "C.", {{"op", std::to_string(i)}});
  }
  for (auto _ : state) benchmark::DoNotOptimize(registry.ExposeText());
}
BENCHMARK(BM_ExposeText);

}  // namespace
}  // namespace cairn::metrics

BENCHMARK_MAIN();
