// continue_bench: what the first write after a sync costs on the worker. A file of --size-mib is
// written through a WriteSession and committed (a write-through fsync); then a write at its end
// continues it in a new session that must hold the committed bytes. Three ways, each run once
// per --runs, in an order that rotates:
//   copy    a new session and a read-write loop through user memory, 4 MiB at a time (what the
//           worker did for every write after a sync until 12-07);
//   kernel  write::CopySpoolFile (copy_file_range: copied in the kernel, or blocks shared on
//           XFS/btrfs) then WriteSession::Reopen (write-back now: its sealed file waits in the
//           queue, so it is copied);
//   reopen  WriteSession::Reopen of the committed spool file itself (write-through now);
//   back    write-back sessions (a digest made while written, hashed on a pool of 2 threads as
//           the worker's): kernel's copy and Reopen, the copy's parts hashed in the background
//           (write-back until 12-07, its copy unchecked);
//   checked the same, Reopen checking the copy against the sealed file's digest first and
//           keeping the part hashes for the next Seal (write-back now).
// Reports continue_s (from the sync's return to the first write accepted: the wait a client's
// write sees, against its 5 s timeout) and commit_s (the next sync: the whole file goes up
// again either way, as a source has no append; back and checked: Seal, then the commit). Every
// object is read back and compared byte for byte (exit 1 on a mismatch). One JSON object per run on
// stdout, then a summary with medians and ratios against `copy`.
//
//   continue_bench --uri file:///DIR --spool-dir DIR [--size-mib 1024] [--runs 5]
//                  [--modes copy,kernel,reopen,back,checked]
//
// docs/benchmarks.md, "A write after a sync".
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "bench_bytes.h"
#include "common/thread_pool.h"
#include "ufs/ufs.h"
#include "write/write_session.h"

namespace {

using cairn::Status;
using cairn::StatusOr;
using cairn::bench::Clock;
using cairn::bench::Seconds;
using cairn::bench::Verify;
using cairn::write::WriteSession;
using cairn::write::WriteSessionOptions;

constexpr uint64_t kChunk = 4 << 20;

struct Flags {
  std::string uri, spool_dir;
  std::vector<std::string> modes = {"copy", "kernel", "reopen", "back", "checked"};
  uint64_t size_mib = 1024;
  int runs = 5;
};

std::vector<char> Bytes(uint64_t offset, uint64_t n, int run) {
  std::vector<char> out(n);
  cairn::bench::Fill(out, offset, run);
  return out;
}

// The old worker's continuation: a new session fed from the committed spool through a buffer.
StatusOr<std::unique_ptr<WriteSession>> ContinueByCopy(
    std::shared_ptr<cairn::ufs::UnderStorage> ufs, const std::string& key,
    const std::string& spool_dir, const WriteSessionOptions& options, cairn::ThreadPool* pool,
    const std::string& from, uint64_t size) {
  CAIRN_ASSIGN_OR_RETURN(auto next, WriteSession::Create(ufs, key, spool_dir, options, pool));
  const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cairn::ErrnoToStatus(errno, "open " + from);
  std::vector<char> chunk(kChunk);
  Status copied;
  for (uint64_t done = 0; done < size && copied.ok();) {
    const ssize_t n = ::pread(fd, chunk.data(), std::min<uint64_t>(kChunk, size - done),
                              static_cast<off_t>(done));
    if (n <= 0) {
      copied = cairn::ErrnoToStatus(n < 0 ? errno : EIO, "read " + from);
      break;
    }
    copied = next->Write(done, std::span<const char>(chunk.data(), static_cast<size_t>(n)));
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  CAIRN_RETURN_IF_ERROR(copied);
  return next;
}

struct Result {
  double continue_s = 0, commit_s = 0;
  cairn::write::WriteSessionStats stats;
};

StatusOr<Result> Run(const Flags& f, std::shared_ptr<cairn::ufs::UnderStorage> ufs,
                     cairn::ThreadPool& pool, cairn::ThreadPool& hashes, const std::string& mode,
                     const std::string& key, int run) {
  const uint64_t size = f.size_mib << 20;
  const bool back = mode == "back" || mode == "checked";
  WriteSessionOptions options;
  if (back) {  // As the worker's write-back sessions.
    options.upload_early = false;
    options.digest = true;
    options.hash_pool = &hashes;
  }
  CAIRN_ASSIGN_OR_RETURN(auto first, WriteSession::Create(ufs, key, f.spool_dir, options, &pool));
  for (uint64_t off = 0; off < size; off += kChunk) {
    const std::vector<char> data = Bytes(off, std::min(kChunk, size - off), run);
    CAIRN_RETURN_IF_ERROR(first->Write(off, data));
  }
  if (back) CAIRN_RETURN_IF_ERROR(first->Seal());
  CAIRN_ASSIGN_OR_RETURN(cairn::ufs::ObjectInfo committed, first->Commit());
  options.condition = cairn::ufs::WriteCondition::Version(committed.version);
  if (mode == "checked") options.expected_digest = first->digest();
  const std::vector<char> more = Bytes(size, kChunk, run);

  const auto t0 = Clock::now();
  std::unique_ptr<WriteSession> next;
  if (mode == "copy") {
    CAIRN_ASSIGN_OR_RETURN(
        next, ContinueByCopy(ufs, key, f.spool_dir, options, &pool, first->spool_path(), size));
  } else if (mode == "kernel" || back) {
    const int fd = ::open(first->spool_path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cairn::ErrnoToStatus(errno, "open " + first->spool_path());
    StatusOr<std::string> copy = cairn::write::CopySpoolFile(fd, size, f.spool_dir);
    ::close(fd);
    CAIRN_RETURN_IF_ERROR(copy.status());
    CAIRN_ASSIGN_OR_RETURN(next, WriteSession::Reopen(ufs, key, *copy, size, options, &pool));
  } else {
    CAIRN_ASSIGN_OR_RETURN(
        next, WriteSession::Reopen(ufs, key, first->spool_path(), size, options, &pool));
    first->KeepSpoolFile();
  }
  first.reset();
  CAIRN_RETURN_IF_ERROR(next->Write(size, more));
  const auto t1 = Clock::now();
  if (back) CAIRN_RETURN_IF_ERROR(next->Seal());
  CAIRN_RETURN_IF_ERROR(next->Commit().status());
  const auto t2 = Clock::now();
  const cairn::write::WriteSessionStats stats = next->stats();
  next.reset();
  CAIRN_RETURN_IF_ERROR(Verify(*ufs, key, size + kChunk, run));
  return Result{Seconds(t0, t1), Seconds(t1, t2), stats};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"the first write after a sync: copy vs kernel copy vs reopen of the spool file"};
  app.add_option("--uri", f.uri, "file:///dir (or s3://bucket/prefix)")->required();
  app.add_option("--spool-dir", f.spool_dir, "local folder for the spool files")->required();
  app.add_option("--size-mib", f.size_mib)->check(CLI::Range(1, 1 << 16));
  app.add_option("--runs", f.runs)->check(CLI::Range(1, 100));
  app.add_option("--modes", f.modes,
                 "which of copy, kernel, reopen, back, checked (ratios need copy and back)")
      ->delimiter(',')
      ->check(CLI::IsMember({"copy", "kernel", "reopen", "back", "checked"}));
  CLI11_PARSE(app, argc, argv);

  auto ufs = cairn::ufs::OpenUnderStorage(f.uri, cairn::ufs::UfsOptions{});
  if (!ufs.ok()) {
    fmt::print(stderr, "continue_bench: {}\n", ufs.status().ToString());
    return 2;
  }
  cairn::ThreadPool pool(4, "uploads");
  cairn::ThreadPool hashes(2, "write-hash");  // The worker's kHashThreads.
  const std::vector<std::string>& modes = f.modes;
  std::map<std::string, std::vector<double>> continue_s, commit_s;
  for (int run = 0; run < f.runs; ++run) {
    for (size_t i = 0; i < modes.size(); ++i) {
      const std::string& mode = modes[(i + static_cast<size_t>(run)) % modes.size()];
      const std::string key = fmt::format("bench/continue-{}-{}.bin", mode, run);
      StatusOr<Result> r = Run(f, *ufs, pool, hashes, mode, key, run);
      if (!r.ok()) {
        fmt::print(stderr, "continue_bench: {} run {}: {}\n", mode, run, r.status().ToString());
        return 1;
      }
      continue_s[mode].push_back(r->continue_s);
      commit_s[mode].push_back(r->commit_s);
      fmt::print(
          "{{\"mode\": \"{}\", \"run\": {}, \"size_mib\": {}, \"continue_s\": {:.4f}, "
          "\"commit_s\": {:.3f}, \"parts_sent\": {}, \"parts_sent_early\": {}, "
          "\"upload_failures\": {}, \"writer_restarts\": {}}}\n",
          mode, run, f.size_mib, r->continue_s, r->commit_s, r->stats.parts_sent,
          r->stats.parts_sent_early, r->stats.upload_failures, r->stats.writer_restarts);
      std::fflush(stdout);
      (void)(*ufs)->Delete(key);
    }
  }
  // Ratios against the way each mode replaced: copy for kernel and reopen, back for checked.
  auto median_of = [&](const std::string& mode) {
    return continue_s.count(mode) ? Median(continue_s[mode]) : 0.0;
  };
  for (const std::string& mode : modes) {
    const double base = median_of(mode == "checked" ? "back" : "copy");
    const std::string ratio = base > 0 ? fmt::format("{:.4f}", median_of(mode) / base) : "null";
    fmt::print(
        "{{\"summary\": \"{}\", \"median_continue_s\": {:.4f}, \"continue_vs_{}\": {}, "
        "\"median_commit_s\": {:.3f}}}\n",
        mode, median_of(mode), mode == "checked" ? "back" : "copy", ratio, Median(commit_s[mode]));
  }
  return 0;
}
