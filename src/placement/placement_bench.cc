// Owner() / Candidates() / PageKeyHash() cost at realistic cluster sizes.
// Run: build/src/placement/placement_bench [--benchmark_filter=Owner]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "placement/ring.h"

namespace cairn::placement {
namespace {

Ring MakeRing(int64_t node_count, bool mixed_weights) {
  std::vector<WorkerNode> nodes;
  for (int64_t i = 0; i < node_count; ++i) {
    const double weight = mixed_weights ? 1.0 + static_cast<double>(i % 3) : 1.0;
    nodes.push_back({"worker-" + std::to_string(i), "10.0.0.1:7070", weight});
  }
  StatusOr<Ring> ring = Ring::Create(std::move(nodes));
  return ring.ok() ? std::move(ring).value() : Ring();
}

// Keys are precomputed so the loop measures placement alone; 4096 distinct keys defeat branch
// prediction on the winner without leaving L1.
std::vector<uint64_t> MakeKeys() {
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 4096; ++i) keys.push_back(PageKeyHash("s3://lake/shard.tar", "", i));
  return keys;
}

void BM_Owner(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0), /*mixed_weights=*/state.range(1) != 0);
  const std::vector<uint64_t> keys = MakeKeys();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.Owner(keys[i++ & 4095]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Owner)
    ->ArgNames({"nodes", "mixed_weights"})
    ->Args({8, 0})
    ->Args({60, 0})
    ->Args({60, 1});

void BM_Candidates3(benchmark::State& state) {
  const Ring ring = MakeRing(state.range(0), /*mixed_weights=*/state.range(1) != 0);
  const std::vector<uint64_t> keys = MakeKeys();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.Candidates(keys[i++ & 4095], 3));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Candidates3)
    ->ArgNames({"nodes", "mixed_weights"})
    ->Args({8, 0})
    ->Args({60, 0})
    ->Args({60, 1});

void BM_PageKeyHash(benchmark::State& state) {
  const std::string object = "s3://lake/datasets/imagenet/train/shard-000123.tar";
  uint64_t page = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(PageKeyHash(object, "etag", page++));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PageKeyHash);

}  // namespace
}  // namespace cairn::placement

BENCHMARK_MAIN();
