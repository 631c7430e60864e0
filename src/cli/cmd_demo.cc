// `cairn demo`: the embedded default, end to end, in one command. Makes (or takes) a local
// folder as the data lake, serves it through a worker and a FUSE mount in this process, reads
// every file twice through the mount, and prints cold vs warm throughput, the hit ratio and
// whether every byte matched the source.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "cairn/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "common/checksum.h"
#include "common/units.h"
#include "fuse/fuse_mount.h"
#include "worker/worker.h"

namespace cairn::cli {
namespace {

namespace fs = std::filesystem;

struct DemoFlags {
  std::string source;
  std::string workdir = "/tmp/cairn-demo";
  int files = 200;
  std::string file_size = "1MiB";
  int large_files = 2;
  std::string large_size = "64MiB";
  int threads = 4;
};

// Writes `size` deterministic pseudo-random bytes (xorshift, seeded per file).
Status WriteSampleFile(const fs::path& path, uint64_t size, uint64_t seed) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError("cannot create " + path.string());
  std::vector<uint64_t> block(1 << 14);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t left = size;
  while (left > 0) {
    for (auto& w : block) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      w = x;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, block.size() * 8));
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    left -= n;
  }
  return out ? Status::Ok() : IoError("write failed: " + path.string());
}

Status MakeDataset(const fs::path& dir, const DemoFlags& f, uint64_t small, uint64_t large) {
  std::string marker = std::to_string(f.files) + "x" + std::to_string(small) + "+" +
                       std::to_string(f.large_files) + "x" + std::to_string(large);
  fs::path marker_path = dir / ".cairn-demo-dataset";
  std::ifstream in(marker_path);
  std::string existing;
  if (in && std::getline(in, existing) && existing == marker) return Status::Ok();
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir / "train", ec);
  fs::create_directories(dir / "large", ec);
  if (ec) return IoError("cannot create " + dir.string() + ": " + ec.message());
  std::printf("generating sample dataset in %s ...\n", dir.c_str());
  for (int i = 0; i < f.files; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "sample-%05d.bin", i);
    CAIRN_RETURN_IF_ERROR(WriteSampleFile(dir / "train" / name, small, i + 1));
  }
  for (int i = 0; i < f.large_files; ++i) {
    CAIRN_RETURN_IF_ERROR(WriteSampleFile(dir / "large" / ("shard-" + std::to_string(i) + ".bin"),
                                          large, 100000 + i));
  }
  std::ofstream(marker_path) << marker << "\n";
  return Status::Ok();
}

// Reads a whole file with 1 MiB reads; returns its XXH3-64 digest over chunked checksums.
StatusOr<uint64_t> DigestFile(const std::string& path, uint64_t* bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  std::string buf(1 << 20, '\0');
  uint64_t digest = 0;
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoToStatus(errno, "read " + path);
      close(fd);
      return s;
    }
    if (n == 0) break;
    digest = digest * 1099511628211ull ^ Checksum64(std::span<const char>(buf.data(), n));
    *bytes += static_cast<uint64_t>(n);
  }
  close(fd);
  return digest;
}

// Drops the kernel's page cache of a file so the next read goes through FUSE to Cairn.
void DropPageCache(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

struct EpochResult {
  double seconds = 0;
  uint64_t bytes = 0;
  std::vector<uint64_t> digests;
  Status status;
};

EpochResult ReadAll(const std::vector<std::string>& paths, int threads) {
  EpochResult r;
  r.digests.resize(paths.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::vector<Status> errors(threads);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = next++; i < paths.size(); i = next++) {
        uint64_t n = 0;
        auto d = DigestFile(paths[i], &n);
        if (!d.ok()) {
          errors[t] = d.status();
          return;
        }
        r.digests[i] = *d;
        bytes += n;
      }
    });
  }
  for (auto& th : pool) th.join();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.bytes = bytes.load();
  for (const Status& s : errors) {
    if (!s.ok()) r.status = s;
  }
  return r;
}

std::vector<std::string> ListFiles(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') {
      out.push_back(fs::relative(e.path(), root).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The hit ratio a reader sees: the share of bytes read through the mount that did not come
// from the source (served by the worker's page cache or the client's readahead buffer).
void PrintEpoch(const char* name, const EpochResult& r, const worker::ServiceStats& before,
                const worker::ServiceStats& after) {
  uint64_t from_source = after.bytes_from_ufs - before.bytes_from_ufs;
  double ratio = r.bytes ? 100.0 * (1.0 - std::min(1.0, double(from_source) / r.bytes)) : 0.0;
  double mib = r.bytes / 1048576.0;
  std::printf("  %-14s %8.2f s %10.1f MiB/s   hit ratio %5.1f%%   read from source %s\n", name,
              r.seconds, mib / r.seconds, ratio, FormatBytes(from_source).c_str());
}

int RunDemo(const DemoFlags& f) {
  if (spdlog::get_level() == spdlog::level::info) spdlog::set_level(spdlog::level::warn);
  auto small = ParseBytes(f.file_size);
  if (!small.ok()) return Fail(small.status().WithContext("--file-size"));
  auto large = ParseBytes(f.large_size);
  if (!large.ok()) return Fail(large.status().WithContext("--large-size"));
  if (f.files < 0 || f.large_files < 0 || f.threads < 1) {
    return Fail(InvalidArgumentError("--files, --large-files must be >= 0 and --threads >= 1"));
  }
  fs::path work(f.workdir);
  fs::path lake = f.source.empty() ? work / "lake" : fs::path(f.source);
  fs::path cache = work / "cache";
  fs::path mnt = work / "mnt";
  std::error_code ec;
  fs::create_directories(work, ec);
  if (f.source.empty()) {
    Status s = MakeDataset(lake, f, *small, *large);
    if (!s.ok()) return Fail(s);
  } else if (!fs::is_directory(lake)) {
    return Fail(NotFoundError("source folder " + lake.string() + " does not exist"));
  }
  lake = fs::canonical(lake, ec);
  std::string unmount = "fusermount3 -u -z " + mnt.string() + " 2>/dev/null";
  if (std::system(unmount.c_str()) != 0) {  // Leftover from an interrupted run, if any.
    spdlog::debug("no stale mount at {}", mnt.string());
  }
  fs::remove_all(cache, ec);  // Start cold.
  fs::create_directories(mnt, ec);

  std::vector<std::string> files = ListFiles(lake);
  uint64_t dataset_bytes = 0;
  for (const auto& p : files) dataset_bytes += fs::file_size(lake / p);
  MountSpec spec;
  spec.path = "/";
  spec.uri = "file://" + lake.string();
  worker::WorkerOptions wo;
  wo.mounts = {spec};
  wo.serve_tcp = false;
  wo.config.metrics_listen = "";
  wo.config.id = "demo";
  wo.config.cache_dirs.push_back({cache.string(), std::max<uint64_t>(2 * dataset_bytes, 64 << 20)});
  auto w = worker::Worker::Start(wo);
  if (!w.ok()) return Fail(w.status());
  ClientOptions co;
  co.mounts = {spec};
  co.local_channel = (*w)->local_channel();
  auto client = Client::Create(co);
  if (!client.ok()) return Fail(client.status());
  fuse::FuseOptions fo;
  fo.mountpoint = mnt.string();
  fo.install_signal_handlers = false;
  auto mount = fuse::FuseMount::Mount(client->get(), fo);
  if (!mount.ok()) return Fail(mount.status());
  fuse::FuseMount* m = mount->get();
  Status run_status;
  std::thread loop([m, &run_status] { run_status = m->Run(); });
  std::atomic<bool> interrupted{false};
  SignalHandler signals([m, &interrupted](int) {
    interrupted = true;
    m->RequestStop();
  });

  std::printf("Cairn demo: %zu files, %s, source %s, mounted at %s\n", files.size(),
              FormatBytes(dataset_bytes).c_str(), spec.uri.c_str(), mnt.c_str());
  std::vector<std::string> through_mount;
  for (const auto& p : ListFiles(mnt)) through_mount.push_back((mnt / p).string());
  int rc = kExitOk;
  if (through_mount.size() != files.size()) {
    rc = Fail(InternalError("the mount lists " + std::to_string(through_mount.size()) +
                            " files, the source " + std::to_string(files.size())));
  }
  EpochResult epochs[2];
  const char* names[2] = {"epoch 1 (cold)", "epoch 2 (warm)"};
  for (int e = 0; e < 2 && rc == kExitOk; ++e) {
    for (const auto& p : through_mount) DropPageCache(p);
    worker::ServiceStats before = (*w)->service()->Stats();
    epochs[e] = ReadAll(through_mount, f.threads);
    if (!epochs[e].status.ok()) {
      rc = Fail(epochs[e].status);
      break;
    }
    PrintEpoch(names[e], epochs[e], before, (*w)->service()->Stats());
  }
  if (rc == kExitOk) {
    std::vector<std::string> source_paths;
    for (const auto& p : files) source_paths.push_back((lake / p).string());
    EpochResult truth = ReadAll(source_paths, f.threads);
    size_t mismatches = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      for (const EpochResult& e : epochs) mismatches += e.digests[i] != truth.digests[i];
    }
    std::printf("  warm/cold speed-up %.1fx; ", epochs[0].seconds / epochs[1].seconds);
    if (mismatches == 0) {
      std::printf("every byte of both epochs matches the source\n");
    } else {
      std::printf("\n");
      rc = Fail(CorruptionError(std::to_string(mismatches) + " file reads differ from the source"));
    }
  }
  m->RequestStop();
  loop.join();
  mount->reset();
  client->reset();
  (*w)->Stop();
  if (rc == kExitOk && !run_status.ok()) rc = Fail(run_status);
  if (interrupted) rc = kExitError;
  return rc;
}

}  // namespace

Runner RegisterDemo(CLI::App* app) {
  auto f = std::make_shared<DemoFlags>();
  CLI::App* cmd = app->add_subcommand(
      "demo", "Serve a local folder through a Cairn mount, read it twice, print cold vs warm");
  cmd->add_option("--source", f->source, "Folder to serve (default: generate a sample dataset)");
  cmd->add_option("--workdir", f->workdir, "Where the dataset, cache and mount point live");
  cmd->add_option("--files", f->files, "Sample files to generate (default 200)");
  cmd->add_option("--file-size", f->file_size, "Size of each sample file (default 1MiB)");
  cmd->add_option("--large-files", f->large_files, "Large files to generate (default 2)");
  cmd->add_option("--large-size", f->large_size, "Size of each large file (default 64MiB)");
  cmd->add_option("--threads", f->threads, "Parallel readers (default 4)");
  return [f] { return RunDemo(*f); };
}

}  // namespace cairn::cli
