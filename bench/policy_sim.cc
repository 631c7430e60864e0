// policy_sim: replays ML training reads through every eviction policy and prints hit ratios.
//
// A page cache of C pages sits in front of datasets read in shuffled epochs (a new random order
// each epoch, the same orders for every policy). Two named workloads:
//
//   oversized    one dataset of D pages, D > C. Ideal (the best any policy can do on average over
//                an epoch): C/D, reached by keeping any C pages resident.
//   train+val    the same training set plus a validation set of V = C/10 pages read in full
//                after every training epoch. Ideal: keep all of V and C-V training pages:
//                training (C-V)/D, validation 100 %, overall C/(D+V).
//
// It drives the real PolicyEngine (policy/policy_engine.h) exactly as the page store does: a hit
// is OnAccess, a miss evicts PickVictim() victims (OnRemove) until the page fits, then OnInsert
// with the dataset as the group. Besides hit ratios it reports the policy's CPU cost per read
// (mean and percentiles of the wall time of each simulated read, clock overhead included) and
// the heap bytes each tracked entry costs.
//
// A benchmark, never a test: it prints the targets of issue 4 as PASS/MISS and exits 0 unless
// the flags are invalid (2). Results and the command: docs/benchmarks.md.
#include <fmt/core.h>
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "policy/policy_engine.h"

namespace cairn::bench {
namespace {

using policy::PolicyEngine;

constexpr uint64_t kPageBytes = 1 << 20;
constexpr uint32_t kTrainGroup = 1;
constexpr uint32_t kValGroup = 2;

struct Flags {
  uint64_t pages = 20000;
  double cache_ratio = 0.5;
  int epochs = 5;
  uint64_t seed = 1;
  double val_ratio = 0.1;  // Validation set size as a fraction of the cache.
  std::vector<std::string> policies = {"lru", "lfu", "fifo", "ml"};
};

// Page ids look like the page store's (uniform 128-bit hashes); the low word keeps the number.
Hash128 PageId(uint64_t page) {
  uint64_t z = page + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return Hash128{z ^ (z >> 31), page};
}

// Hits and reads of one group in one epoch.
struct Count {
  uint64_t hits = 0;
  uint64_t reads = 0;
  double ratio() const { return reads == 0 ? 0 : static_cast<double>(hits) / reads; }
};

struct EpochResult {
  Count train;
  Count val;
  Count all() const { return {train.hits + val.hits, train.reads + val.reads}; }
};

struct RunResult {
  std::vector<EpochResult> epochs;
  std::vector<double> read_ns;  // Every read's wall time.
  double seconds = 0;
};

// One simulated cache: the resident set plus the policy deciding evictions.
class SimCache {
 public:
  SimCache(std::unique_ptr<PolicyEngine> policy, uint64_t capacity_pages, uint64_t id_space)
      : policy_(std::move(policy)), capacity_(capacity_pages * kPageBytes), resident_(id_space) {}

  // Returns true on a hit.
  bool Read(uint64_t page, uint32_t group) {
    const Hash128 id = PageId(page);
    if (resident_[page]) {
      policy_->OnAccess(id);
      return true;
    }
    while (used_ + kPageBytes > capacity_) {
      std::optional<Hash128> victim = policy_->PickVictim();
      if (!victim) break;  // Cannot happen: nothing is pinned or filtered here.
      policy_->OnRemove(*victim, policy::RemoveReason::kEvicted);
      resident_[victim->low] = 0;
      used_ -= kPageBytes;
    }
    policy_->OnInsert(id, kPageBytes, {.group = group});
    resident_[page] = 1;
    used_ += kPageBytes;
    return false;
  }

 private:
  std::unique_ptr<PolicyEngine> policy_;
  const uint64_t capacity_;
  uint64_t used_ = 0;
  std::vector<uint8_t> resident_;
};

// Pages 0..train-1 are the training set, train..train+val-1 the validation set (val may be 0).
RunResult Run(const std::string& kind, const Flags& flags, uint64_t train, uint64_t val,
              uint64_t cache_pages) {
  auto engine = PolicyEngine::Create(kind);
  RunResult result;
  if (!engine.ok()) return result;  // Names were validated in main.
  (*engine)->Reserve(cache_pages);
  SimCache cache(std::move(*engine), cache_pages, train + val);
  std::vector<uint64_t> train_order(train), val_order(val);
  std::iota(train_order.begin(), train_order.end(), 0);
  std::iota(val_order.begin(), val_order.end(), train);
  std::mt19937_64 rng(flags.seed);  // Same seed for every policy: same orders.
  result.read_ns.reserve(static_cast<size_t>(flags.epochs) * (train + val));
  auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    std::shuffle(train_order.begin(), train_order.end(), rng);
    std::shuffle(val_order.begin(), val_order.end(), rng);
    EpochResult er;
    auto read_all = [&](const std::vector<uint64_t>& order, uint32_t group, Count* count) {
      for (uint64_t page : order) {
        auto t0 = std::chrono::steady_clock::now();
        bool hit = cache.Read(page, group);
        auto t1 = std::chrono::steady_clock::now();
        result.read_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
        count->hits += hit;
        ++count->reads;
      }
    };
    read_all(train_order, kTrainGroup, &er.train);
    read_all(val_order, kValGroup, &er.val);
    result.epochs.push_back(er);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::string Pct(double ratio) { return fmt::format("{:5.1f}%", 100 * ratio); }

void PrintMachine() {
  std::string model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  fmt::print("machine: {} hardware threads, {}\n", std::thread::hardware_concurrency(), model);
}

void PrintCost(const std::vector<std::string>& kinds, const std::vector<RunResult>& runs) {
  fmt::print("\n  policy cost per simulated read (wall time incl. ~20-30 ns of clock reads):\n");
  fmt::print("  {:<6} {:>9} {:>9} {:>9} {:>9} {:>10}\n", "policy", "mean ns", "p50 ns", "p99 ns",
             "max ns", "reads/s");
  for (size_t i = 0; i < kinds.size(); ++i) {
    const auto& ns = runs[i].read_ns;
    double mean = ns.empty() ? 0 : std::accumulate(ns.begin(), ns.end(), 0.0) / ns.size();
    fmt::print("  {:<6} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>10.3g}\n", kinds[i], mean,
               Percentile(ns, 0.5), Percentile(ns, 0.99), Percentile(ns, 1.0),
               ns.size() / std::max(runs[i].seconds, 1e-9));
  }
}

// Issue 4 targets, per epoch from the second: ml >= 90 % of ideal and >= 2x lru.
void PrintTargets(const std::vector<double>& ml, const std::vector<double>& lru, double ideal) {
  if (ml.size() < 2) return;  // No "ml" run, or a single epoch.
  double worst_vs_ideal = 1e9, worst_vs_lru = 1e9;
  bool doubling_possible = true;  // 2x lru cannot be reached once lru gets over half the ideal.
  for (size_t e = 1; e < ml.size(); ++e) {
    worst_vs_ideal = std::min(worst_vs_ideal, ml[e] / ideal);
    if (lru.empty()) continue;
    worst_vs_lru = std::min(worst_vs_lru, lru[e] > 0 ? ml[e] / lru[e] : 1e9);
    if (2 * lru[e] > ideal) doubling_possible = false;
  }
  fmt::print("  target ml >= 90% of ideal from epoch 2: worst {:.1f}% -> {}\n",
             100 * worst_vs_ideal, worst_vs_ideal >= 0.9 ? "PASS" : "MISS");
  if (!lru.empty()) {
    const char* verdict = worst_vs_lru >= 2   ? "PASS"
                          : doubling_possible ? "MISS"
                                              : "n/a (2x lru is above the ideal)";
    fmt::print("  target ml >= 2x lru from epoch 2:       worst {:.2f}x -> {}\n", worst_vs_lru,
               verdict);
  }
}

void Oversized(const Flags& flags, uint64_t cache_pages) {
  const double ideal = std::min(1.0, static_cast<double>(cache_pages) / flags.pages);
  fmt::print("\n== oversized: {} pages read in {} shuffled epochs through {} pages ==\n",
             flags.pages, flags.epochs, cache_pages);
  std::vector<RunResult> runs;
  for (const std::string& kind : flags.policies) {
    runs.push_back(Run(kind, flags, flags.pages, 0, cache_pages));
  }
  fmt::print("  {:<6}", "epoch");
  for (const std::string& kind : flags.policies) fmt::print(" {:>7}", kind);
  fmt::print(" {:>7}\n", "ideal");
  std::vector<double> ml, lru;
  for (int e = 0; e < flags.epochs; ++e) {
    fmt::print("  {:<6}", e + 1);
    for (size_t i = 0; i < runs.size(); ++i) {
      double r = runs[i].epochs[e].train.ratio();
      fmt::print(" {:>7}", Pct(r));
      if (flags.policies[i] == "ml") ml.push_back(r);
      if (flags.policies[i] == "lru") lru.push_back(r);
    }
    fmt::print(" {:>7}\n", Pct(ideal));
  }
  PrintTargets(ml, lru, ideal);
  PrintCost(flags.policies, runs);
}

void TrainVal(const Flags& flags, uint64_t cache_pages) {
  const uint64_t val = std::max<uint64_t>(1, static_cast<uint64_t>(flags.val_ratio * cache_pages));
  const double ideal_train =
      val >= cache_pages ? 0 : std::min(1.0, static_cast<double>(cache_pages - val) / flags.pages);
  const double ideal_all = static_cast<double>(std::min(cache_pages, flags.pages + val)) /
                           static_cast<double>(flags.pages + val);
  fmt::print(
      "\n== train+val: {} training pages + {} validation pages (read after each training epoch) "
      "through {} pages ==\n",
      flags.pages, val, cache_pages);
  std::vector<RunResult> runs;
  for (const std::string& kind : flags.policies) {
    runs.push_back(Run(kind, flags, flags.pages, val, cache_pages));
  }
  fmt::print("  hit ratio per epoch, train / val / overall:\n  {:<6}", "epoch");
  for (const std::string& kind : flags.policies) fmt::print(" {:>22}", kind);
  fmt::print(" {:>22}\n", "ideal");
  std::vector<double> ml, lru;
  for (int e = 0; e < flags.epochs; ++e) {
    fmt::print("  {:<6}", e + 1);
    for (size_t i = 0; i < runs.size(); ++i) {
      const EpochResult& er = runs[i].epochs[e];
      fmt::print(" {:>22}", fmt::format("{} {} {}", Pct(er.train.ratio()), Pct(er.val.ratio()),
                                        Pct(er.all().ratio())));
      if (flags.policies[i] == "ml") ml.push_back(er.all().ratio());
      if (flags.policies[i] == "lru") lru.push_back(er.all().ratio());
    }
    fmt::print(" {:>22}\n", fmt::format("{} {} {}", Pct(ideal_train), Pct(1.0), Pct(ideal_all)));
  }
  fmt::print("  (targets on the overall ratio)\n");
  PrintTargets(ml, lru, ideal_all);
}

// Heap bytes per tracked entry of a `kind` engine holding `entries` entries spread over 4 groups,
// every one with a TTL or none (glibc's count of allocated bytes, chunk headers included).
double BytesPerEntry(const std::string& kind, uint64_t entries, bool ttl) {
  const size_t before = mallinfo2().uordblks;
  double per_entry = 0;
  {
    auto engine = PolicyEngine::Create(kind);
    if (!engine.ok()) return 0;
    for (uint64_t i = 0; i < entries; ++i) {
      (*engine)->OnInsert(PageId(i), kPageBytes,
                          {.group = static_cast<uint32_t>(i % 4),
                           .expires_at_us = ttl ? static_cast<int64_t>(1 + i) : 0});
    }
    per_entry = static_cast<double>(mallinfo2().uordblks - before) / entries;
  }
  return per_entry;
}

void PrintMemory(const Flags& flags, uint64_t entries) {
  fmt::print("\n== memory: {} tracked entries in 4 groups ==\n", entries);
  fmt::print("  {:<6} {:>16} {:>16}\n", "policy", "bytes/entry", "with TTL");
  for (const std::string& kind : flags.policies) {
    fmt::print("  {:<6} {:>16.1f} {:>16.1f}\n", kind, BytesPerEntry(kind, entries, false),
               BytesPerEntry(kind, entries, true));
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app("Replays shuffled multi-epoch dataset reads through Cairn's eviction policies.");
  app.add_option("--pages", flags.pages, "training dataset size in pages (D)")
      ->check(CLI::Range(uint64_t{16}, uint64_t{1} << 30));
  app.add_option("--cache-ratio", flags.cache_ratio, "cache size as a fraction of D")
      ->check(CLI::Range(0.01, 4.0));
  app.add_option("--epochs", flags.epochs, "epochs per run")->check(CLI::Range(1, 1000));
  app.add_option("--seed", flags.seed, "seed of the shuffles (same orders for every policy)");
  app.add_option("--val-ratio", flags.val_ratio,
                 "train+val: validation set size as a fraction of the cache")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--policies", flags.policies, "policies to compare (comma-separated)")
      ->delimiter(',');
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const std::string& kind : flags.policies) {
    if (auto p = PolicyEngine::Create(kind); !p.ok()) {
      fmt::print(stderr, "policy_sim: {}\n", p.status().ToString());
      return 2;
    }
  }
  const uint64_t cache_pages =
      std::max<uint64_t>(1, static_cast<uint64_t>(flags.cache_ratio * flags.pages));
  PrintMachine();
  fmt::print("config: pages={} cache={} (ratio {}) epochs={} seed={} page={} MiB\n", flags.pages,
             cache_pages, flags.cache_ratio, flags.epochs, flags.seed, kPageBytes >> 20);
  Oversized(flags, cache_pages);
  TrainVal(flags, cache_pages);
  PrintMemory(flags, cache_pages);
  return 0;
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) { return cairn::bench::Main(argc, argv); }
