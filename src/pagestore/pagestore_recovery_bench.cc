// pagestore_recovery_bench: how fast a restarted page store serves hits and rebuilds its index.
//
//   pagestore_recovery_bench --dir=/mnt/nvme/bench --pages=1000000 [--page_bytes=0]
//                            [--write_threads=4] [--scan_threads=4] [--reuse] [--keep]
//
// 1. Fills --dir with --pages pages through PageStore::Put in a child process (skipped with
//    --reuse, which reopens a folder a previous run kept with --keep). Nothing is persisted at
//    shutdown, so the child's exit leaves the state a kill -9 leaves.
// 2. Reopens it in this process (so memory is measured on a fresh heap) and measures: Create()
// latency, time to the first hit, hit latency while the
//    scan runs (files probed by name), total scan time, hit latency after the scan, and memory
//    per indexed page.
// Caches are as the fill left them (warm); on a cold cache the scan's fstatat calls read inodes
// from the device, which --scan_threads overlaps.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pagestore/page_store.h"

namespace cairn::pagestore {
namespace {

struct Flags {
  std::string dir;
  uint64_t pages = 1000000;
  uint32_t page_bytes = 0;
  int write_threads = 4;
  int scan_threads = 4;
  bool reuse = false;
  bool keep = false;
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--dir=")) {
      f->dir = v;
    } else if (const char* v = value("--pages=")) {
      f->pages = std::stoull(v);
    } else if (const char* v = value("--page_bytes=")) {
      f->page_bytes = static_cast<uint32_t>(std::stoul(v));
    } else if (const char* v = value("--write_threads=")) {
      f->write_threads = std::stoi(v);
    } else if (const char* v = value("--scan_threads=")) {
      f->scan_threads = std::stoi(v);
    } else if (a == "--reuse") {
      f->reuse = true;
    } else if (a == "--keep") {
      f->keep = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return false;
    }
  }
  if (f->dir.empty()) std::fprintf(stderr, "--dir is required\n");
  return !f->dir.empty();
}

PageKey KeyOf(uint64_t i) {
  return PageKey{"s3://bench-bucket/train/shard-" + std::to_string(i / 64) + ".tar", "etag-1",
                 i % 64};
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

uint64_t RssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

PageStoreOptions Options(const Flags& f) {
  PageStoreOptions o;
  // Room for every page: page file (header block + data) rounded to blocks, plus its name.
  uint64_t per_page = 4096 + (f.page_bytes + 4095) / 4096 * 4096 + 64;
  o.dirs = {{f.dir, f.pages * per_page + (64 << 20)}};
  o.page_size = std::max<uint32_t>(f.page_bytes, 1);
  o.recovery_threads_per_dir = f.scan_threads;
  return o;
}

std::string Percentiles(std::vector<double> us) {
  if (us.empty()) return "n=0";
  std::sort(us.begin(), us.end());
  char buf[128];
  std::snprintf(buf, sizeof(buf), "n=%zu p50=%.1f us p99=%.1f us max=%.1f us", us.size(),
                us[us.size() / 2], us[us.size() * 99 / 100], us.back());
  return buf;
}

int Fill(const Flags& f) {
  auto store = PageStore::Create(Options(f));
  if (!store.ok()) {
    std::fprintf(stderr, "create: %s\n", store.status().ToString().c_str());
    return 1;
  }
  std::string data(f.page_bytes, 'p');
  std::atomic<uint64_t> next{0};
  std::atomic<int> errors{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  for (int t = 0; t < f.write_threads; ++t) {
    writers.emplace_back([&] {
      for (uint64_t i = next++; i < f.pages; i = next++) {
        if (!(*store)->Put(KeyOf(i), data).ok()) ++errors;
      }
    });
  }
  for (auto& w : writers) w.join();
  double s = Seconds(start);
  std::printf("fill:       %llu pages of %u bytes in %.1f s (%.0f puts/s, %d threads), %d errors\n",
              static_cast<unsigned long long>(f.pages), f.page_bytes, s, f.pages / s,
              f.write_threads, errors.load());
  return errors.load() == 0 ? 0 : 1;
}

int Restart(const Flags& f) {
  std::mt19937_64 rng(1);
  uint64_t rss_before = RssBytes();
  auto start = std::chrono::steady_clock::now();
  auto store = PageStore::Create(Options(f));
  double create_s = Seconds(start);
  if (!store.ok()) {
    std::fprintf(stderr, "create: %s\n", store.status().ToString().c_str());
    return 1;
  }
  auto first = (*store)->Open(KeyOf(rng() % f.pages));
  double first_hit_s = Seconds(start);
  if (!first.ok()) {
    std::fprintf(stderr, "first open: %s\n", first.status().ToString().c_str());
    return 1;
  }
  std::vector<double> during;
  int misses = 0;
  while ((*store)->Stats().recovering && during.size() < 100000) {
    auto t = std::chrono::steady_clock::now();
    auto r = (*store)->Open(KeyOf(rng() % f.pages));
    if (!r.ok()) ++misses;
    during.push_back(Seconds(t) * 1e6);
  }
  while ((*store)->Stats().recovering) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double scan_s = Seconds(start);
  PageStoreStats stats = (*store)->Stats();
  std::vector<double> after;
  for (int i = 0; i < 20000; ++i) {
    auto t = std::chrono::steady_clock::now();
    auto r = (*store)->Open(KeyOf(rng() % f.pages));
    if (!r.ok()) ++misses;
    after.push_back(Seconds(t) * 1e6);
  }
  uint64_t rss_after = RssBytes();
  std::printf("create:     %.1f ms\n", create_s * 1e3);
  std::printf("first hit:  %.1f ms after Create() was called\n", first_hit_s * 1e3);
  std::printf("hits during scan: %s\n", Percentiles(during).c_str());
  std::printf("scan:       %llu pages indexed in %.0f ms (%.0f pages/s, %d threads)\n",
              static_cast<unsigned long long>(stats.recovered_pages), scan_s * 1e3,
              stats.recovered_pages / scan_s, f.scan_threads);
  std::printf("hits after scan:  %s\n", Percentiles(after).c_str());
  std::printf("misses:     %d (expected 0)\n", misses);
  std::printf("memory:     %.0f MiB more RSS, %.0f bytes per page\n",
              (rss_after - rss_before) / 1048576.0,
              static_cast<double>(rss_after - rss_before) / std::max<uint64_t>(1, stats.pages));
  return misses == 0 && stats.recovered_pages == f.pages ? 0 : 1;
}

}  // namespace
}  // namespace cairn::pagestore

int main(int argc, char** argv) {
  cairn::pagestore::Flags flags;
  if (!cairn::pagestore::ParseFlags(argc, argv, &flags)) return 2;
  if (!flags.reuse) {
    std::filesystem::remove_all(flags.dir);
    pid_t child = ::fork();
    if (child < 0) return 1;
    if (child == 0) {
      std::fflush(stdout);
      int rc = cairn::pagestore::Fill(flags);
      std::fflush(stdout);
      ::_exit(rc);
    }
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "fill failed\n");
      return 1;
    }
  }
  int rc = cairn::pagestore::Restart(flags);
  if (!flags.keep) std::filesystem::remove_all(flags.dir);
  return rc;
}
