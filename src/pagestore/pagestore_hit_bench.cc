// pagestore_hit_bench: warm hits on one cache folder from many threads at once (the page store's
// share of a worker serving many readers): PageStore::Open plus a read of the whole page, for
// 4 KiB and 1 MiB pages, with 1, 4 and 16 threads.
//
//   build/src/pagestore/pagestore_hit_bench [--dir=/tmp] [--benchmark_repetitions=5 ...]
//
// The folder lives under --dir (default: the system temp folder) and is filled once before the
// runs, so its files are in the kernel page cache: what is measured is the store's own cost per
// hit (index lookup, TTL check, policy touch, open-file cache, the checks that the file is still
// the page's) and how it scales with threads, not the device. Results: docs/benchmarks.md
// ("Page store hits from many threads").
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "pagestore/page_store.h"

namespace cairn::pagestore {
namespace {

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<PageStore> store;
  std::vector<PageKey> keys;
  uint32_t page_bytes = 0;
};

// 0: 512 pages of 4 KiB, 1: 96 of 1 MiB (both fit the folder's open-file cache of 1024 files:
// every hit reuses an open file); 2: 4096 pages of 4 KiB (most hits open the page's file by
// name, as on a worker caching millions of pages).
Fixture* fixtures[3] = {nullptr, nullptr, nullptr};

Fixture* Make(const std::string& root, uint32_t page_bytes, int pages) {
  auto* f = new Fixture;
  f->page_bytes = page_bytes;
  f->dir = std::filesystem::path(root) /
           ("cairn-hit-bench-" + std::to_string(::getpid()) + "-" + std::to_string(page_bytes));
  std::filesystem::remove_all(f->dir);
  PageStoreOptions o;
  o.dirs.push_back(
      {f->dir.string(), static_cast<uint64_t>(pages) * (page_bytes + 65536) + (64 << 20)});
  o.page_size = page_bytes;
  auto store = PageStore::Create(o);
  if (!store.ok()) {
    fprintf(stderr, "page store: %s\n", store.status().ToString().c_str());
    exit(1);
  }
  f->store = std::move(store).value();
  std::string data(page_bytes, 'x');
  for (int i = 0; i < pages; ++i) {
    PageKey key{"s3://bench/object-" + std::to_string(i / 8), "v1", static_cast<uint64_t>(i % 8)};
    data[0] = static_cast<char>(i);
    if (!f->store->Put(key, data).ok()) {
      fprintf(stderr, "put failed\n");
      exit(1);
    }
    f->keys.push_back(key);
  }
  return f;
}

void BM_Hit(benchmark::State& state) {
  Fixture* f = fixtures[state.range(0)];
  std::mt19937_64 rng(state.thread_index() * 7919 + 1);
  std::string buffer(f->page_bytes, '\0');
  for (auto _ : state) {
    const PageKey& key = f->keys[rng() % f->keys.size()];
    auto reader = f->store->Open(key);
    if (!reader.ok() || !(*reader)->ReadAt(0, buffer).ok()) {
      state.SkipWithError("hit failed");
      break;
    }
    benchmark::DoNotOptimize(buffer.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * int64_t{f->page_bytes});
  state.SetLabel(std::string(f->page_bytes == 4096 ? "4KiB" : "1MiB") + " x " +
                 std::to_string(f->keys.size()));
}
BENCHMARK(BM_Hit)->Arg(0)->Arg(1)->Arg(2)->Threads(1)->Threads(4)->Threads(16)->UseRealTime();

}  // namespace
}  // namespace cairn::pagestore

int main(int argc, char** argv) {
  std::string root = std::filesystem::temp_directory_path().string();
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--dir=", 0) == 0) {
      root = arg.substr(6);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  using cairn::pagestore::fixtures;
  fixtures[0] = cairn::pagestore::Make(root, 4096, 512);
  fixtures[1] = cairn::pagestore::Make(root, 1 << 20, 96);
  fixtures[2] = cairn::pagestore::Make(root, 4096, 4096);
  benchmark::RunSpecifiedBenchmarks();
  for (auto* f : fixtures) {
    f->store.reset();
    std::filesystem::remove_all(f->dir);
    delete f;
  }
  return 0;
}
