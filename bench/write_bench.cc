// write_bench: what writing a checkpoint through a WriteSession (src/write) costs, against
// what a job does without a write path: write a local file, then upload it after close. One
// process, one object store, one object per run, sequential writes of --chunk-kib bytes (as
// torch.save streams), optionally paced to --write-mbps (serialisation and device-to-host copies
// rarely run at disk speed).
//
// Modes, each run once per --runs, alternating:
//   session  writes go to a WriteSession: full parts go up while the file is written; Commit
//            sends the rest. Reports write_s (all writes) and commit_s (close to durable).
//   upload   writes go to a local file (fsync at close), then an ObjectWriter uploads it with the
//            same part size and --in-flight parts in parallel. write_s, commit_s (= upload).
//   local    the local file only (write + fsync): the local-disk speed a job would get.
// Every uploaded object is read back and compared byte for byte (exit 1 on a mismatch).
// Prints one JSON object per run on stdout.
//
//   write_bench --uri s3://bucket/prefix --endpoint http://127.0.0.1:PORT --access-key K
//       --secret-key S --spool-dir DIR [--size-mib 512] [--chunk-kib 1024] [--part-mib 8]
//       [--in-flight 4] [--write-mbps 0] [--runs 3]
//
// bench/write_bench.py runs it against s3rver (docs/benchmarks.md, "Checkpoint writes").
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bench_bytes.h"
#include "common/thread_pool.h"
#include "ufs/ufs.h"
#include "write/write_session.h"

namespace {

using cairn::Status;
using cairn::StatusOr;
using cairn::bench::Clock;
using cairn::bench::Fill;
using cairn::bench::Seconds;
using cairn::bench::Verify;

struct Flags {
  std::string uri, endpoint, access_key, secret_key, spool_dir;
  uint64_t size_mib = 512;
  uint64_t chunk_kib = 1024;
  uint64_t part_mib = 8;
  int in_flight = 4;
  double write_mbps = 0;
  int runs = 3;
};

// Calls write(offset, chunk) for the whole object, paced to flags.write_mbps if set.
template <typename WriteFn>
Status WriteAll(const Flags& f, int run, WriteFn write) {
  const uint64_t size = f.size_mib << 20;
  std::vector<char> chunk(f.chunk_kib << 10);
  const auto start = Clock::now();
  for (uint64_t off = 0; off < size; off += chunk.size()) {
    chunk.resize(std::min<uint64_t>(chunk.size(), size - off));
    Fill(chunk, off, run);
    if (f.write_mbps > 0) {
      auto due = start + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(off / (f.write_mbps * 1e6)));
      std::this_thread::sleep_until(due);
    }
    CAIRN_RETURN_IF_ERROR(write(off, std::span<const char>(chunk.data(), chunk.size())));
  }
  return Status::Ok();
}

StatusOr<int> CreateLocal(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return cairn::ErrnoToStatus(errno, "open " + path);
  return fd;
}

Status PwriteAll(int fd, std::span<const char> data, uint64_t off) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off));
    if (n < 0) return cairn::ErrnoToStatus(errno, "pwrite");
    data = data.subspan(static_cast<size_t>(n));
    off += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

struct Result {
  double write_s = 0, commit_s = 0;
};

StatusOr<Result> RunSession(const Flags& f, std::shared_ptr<cairn::ufs::UnderStorage> ufs,
                            cairn::ThreadPool& pool, const std::string& key, int run) {
  cairn::write::WriteSessionOptions options;
  options.part_size = f.part_mib << 20;
  options.max_uploads_in_flight = f.in_flight;
  CAIRN_ASSIGN_OR_RETURN(auto session,
                         cairn::write::WriteSession::Create(ufs, key, f.spool_dir, options, &pool));
  const auto t0 = Clock::now();
  CAIRN_RETURN_IF_ERROR(WriteAll(
      f, run, [&](uint64_t off, std::span<const char> data) { return session->Write(off, data); }));
  const auto t1 = Clock::now();
  CAIRN_RETURN_IF_ERROR(session->Commit().status());
  const auto t2 = Clock::now();
  CAIRN_RETURN_IF_ERROR(Verify(*ufs, key, f.size_mib << 20, run));
  return Result{Seconds(t0, t1), Seconds(t1, t2)};
}

// Uploads the local file at `path` with an ObjectWriter, `in_flight` parts at once.
Status Upload(const Flags& f, cairn::ufs::UnderStorage& ufs, const std::string& path,
              const std::string& key) {
  const uint64_t size = f.size_mib << 20;
  cairn::ufs::WriterOptions options;
  options.part_size = f.part_mib << 20;
  CAIRN_ASSIGN_OR_RETURN(auto writer, ufs.StartWrite(key, options));
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, writer->layout().PartCount(size));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cairn::ErrnoToStatus(errno, "open " + path);
  std::atomic<uint32_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < f.in_flight; ++t) {
    threads.emplace_back([&] {
      for (uint32_t i = next++; i + 1 < count && !failed; i = next++) {
        std::vector<char> buf(writer->layout().Size(i));
        if (::pread(fd, buf.data(), buf.size(), static_cast<off_t>(writer->layout().Offset(i))) !=
                static_cast<ssize_t>(buf.size()) ||
            !writer->WritePart(i, buf).ok()) {
          failed = true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const uint64_t tail_start = count == 0 ? 0 : writer->layout().Offset(count - 1);
  std::vector<char> tail(size - tail_start);
  ssize_t n = ::pread(fd, tail.data(), tail.size(), static_cast<off_t>(tail_start));
  ::close(fd);
  if (failed || n != static_cast<ssize_t>(tail.size())) {
    return cairn::UnavailableError("upload of a part failed");
  }
  return writer->Commit(size, tail).status();
}

StatusOr<Result> RunLocal(const Flags& f, cairn::ufs::UnderStorage* ufs, const std::string& key,
                          int run) {
  const std::string path = f.spool_dir + "/local-" + std::to_string(run) + ".bin";
  CAIRN_ASSIGN_OR_RETURN(int fd, CreateLocal(path));
  const auto t0 = Clock::now();
  Status written = WriteAll(
      f, run, [&](uint64_t off, std::span<const char> data) { return PwriteAll(fd, data, off); });
  if (written.ok() && ::fsync(fd) != 0) written = cairn::ErrnoToStatus(errno, "fsync");
  ::close(fd);
  const auto t1 = Clock::now();
  Status uploaded = written;
  if (written.ok() && ufs != nullptr) uploaded = Upload(f, *ufs, path, key);
  const auto t2 = Clock::now();
  ::unlink(path.c_str());
  CAIRN_RETURN_IF_ERROR(uploaded);
  if (ufs != nullptr) CAIRN_RETURN_IF_ERROR(Verify(*ufs, key, f.size_mib << 20, run));
  return Result{Seconds(t0, t1), ufs != nullptr ? Seconds(t1, t2) : 0.0};
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"checkpoint writes through a WriteSession vs local file then upload"};
  app.add_option("--uri", f.uri, "s3://bucket/prefix or file:///dir")->required();
  app.add_option("--endpoint", f.endpoint);
  app.add_option("--access-key", f.access_key);
  app.add_option("--secret-key", f.secret_key);
  app.add_option("--spool-dir", f.spool_dir, "local folder for spool and local files")->required();
  app.add_option("--size-mib", f.size_mib)->check(CLI::Range(1, 1 << 20));
  app.add_option("--chunk-kib", f.chunk_kib)->check(CLI::Range(1, 1 << 20));
  app.add_option("--part-mib", f.part_mib)->check(CLI::Range(1, 1024));
  app.add_option("--in-flight", f.in_flight)->check(CLI::Range(1, 64));
  app.add_option("--write-mbps", f.write_mbps, "pace writes (0 = as fast as possible)");
  app.add_option("--runs", f.runs)->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  cairn::ufs::UfsOptions options;
  options.endpoint = f.endpoint;
  options.access_key = f.access_key;
  options.secret_key = f.secret_key;
  options.max_connections = std::max(8, f.in_flight * 2);
  auto ufs = cairn::ufs::OpenUnderStorage(f.uri, options);
  if (!ufs.ok()) {
    fmt::print(stderr, "write_bench: {}\n", ufs.status().ToString());
    return 2;
  }
  cairn::ThreadPool pool(f.in_flight, "uploads");
  for (int run = 0; run < f.runs; ++run) {
    for (const std::string mode : {"session", "upload", "local"}) {
      const std::string key = fmt::format("bench/{}-{}.bin", mode, run);
      StatusOr<Result> r = mode == "session"  ? RunSession(f, *ufs, pool, key, run)
                           : mode == "upload" ? RunLocal(f, ufs->get(), key, run)
                                              : RunLocal(f, nullptr, key, run);
      if (!r.ok()) {
        fmt::print(stderr, "write_bench: {} run {}: {}\n", mode, run, r.status().ToString());
        return 1;
      }
      const double mb = static_cast<double>(f.size_mib << 20) / 1e6;
      fmt::print(
          "{{\"mode\": \"{}\", \"run\": {}, \"size_mib\": {}, \"write_s\": {:.3f}, "
          "\"commit_s\": {:.3f}, \"total_s\": {:.3f}, \"mbps\": {:.1f}}}\n",
          mode, run, f.size_mib, r->write_s, r->commit_s, r->write_s + r->commit_s,
          mb / (r->write_s + r->commit_s));
      std::fflush(stdout);
      (void)(*ufs)->Delete(key);
    }
  }
  return 0;
}
