// S3UnderStorage::ParallelRead: a large read as parallel ranged GETs.
//
// The read is cut into parts of parallel_read_part bytes. The calling thread and up to
// (parts - 1) helpers from the store's part pool claim parts from a shared counter until none is
// left, so the caller always makes progress even when the pool is busy with other reads, and
// concurrency stays bounded by the pool (and, below it, by the connection pool). Helper tasks
// only touch the caller's buffer for parts they claimed, and the caller returns only after every
// claimed part finished; a helper that starts late finds nothing to claim and touches nothing.
#include <algorithm>
#include <atomic>
#include <optional>
#include <vector>

#include "common/thread_annotations.h"
#include "ufs/s3_ufs.h"

namespace cairn::ufs {
namespace {

constexpr int kMaxPartThreads = 32;

}  // namespace

ThreadPool& S3UnderStorage::PartPool() {
  std::call_once(pool_once_, [this] {
    part_pool_ =
        std::make_unique<ThreadPool>(std::clamp(max_connections_, 1, kMaxPartThreads), "s3-parts");
  });
  return *part_pool_;
}

StatusOr<size_t> S3UnderStorage::ParallelRead(std::string_view key,
                                              std::string_view expected_version, uint64_t offset,
                                              std::span<char> out) {
  const size_t part = static_cast<size_t>(parallel_part_);
  const size_t parts = (out.size() + part - 1) / part;

  struct Shared {
    explicit Shared(size_t n) : results(n) {}
    std::atomic<size_t> next{0};
    Mutex mu;
    CondVar done_cv;
    size_t done GUARDED_BY(mu) = 0;
    std::vector<std::optional<StatusOr<RangeResult>>> results GUARDED_BY(mu);
  };
  auto shared = std::make_shared<Shared>(parts);
  const std::string key_copy(key);
  const std::string version_copy(expected_version);
  // Runs on the caller and on helpers; see the file comment for why captures stay valid.
  auto work = [this, shared, parts, part, offset, out, &key_copy, &version_copy]() {
    while (true) {
      size_t i = shared->next.fetch_add(1);
      if (i >= parts) return;
      size_t begin = i * part;
      size_t len = std::min(part, out.size() - begin);
      StatusOr<RangeResult> r =
          GetRange(key_copy, version_copy, offset + begin, out.subspan(begin, len));
      MutexLock lock(&shared->mu);
      shared->results[i].emplace(std::move(r));
      ++shared->done;
      shared->done_cv.NotifyAll();
    }
  };
  ThreadPool& pool = PartPool();
  size_t helpers = std::min<size_t>(parts - 1, static_cast<size_t>(kMaxPartThreads));
  for (size_t h = 0; h < helpers; ++h) {
    // A late helper must not dereference the caller's stack: it only checks `next`.
    pool.Submit([shared, parts, work]() {
      if (shared->next.load() >= parts) return;
      work();
    });
  }
  work();

  MutexLock lock(&shared->mu);
  shared->done_cv.Wait(&shared->mu, [&]() REQUIRES(shared->mu) { return shared->done == parts; });
  std::string reference(expected_version);
  size_t total = 0;
  bool reached_end = false;
  for (size_t i = 0; i < parts; ++i) {
    const StatusOr<RangeResult>& r = *shared->results[i];
    if (!r.ok()) return r.status();
    if (!r->etag.empty()) {
      if (reference.empty()) reference = r->etag;
      if (r->etag != reference) {
        return FailedPreconditionError(ResourceOf(key) + " changed during a parallel read (ETag " +
                                       reference + " vs " + r->etag + ")");
      }
    }
    if (reached_end) continue;
    size_t len = std::min(part, out.size() - i * part);
    total += r->bytes;
    if (r->bytes < len) reached_end = true;  // The object ends inside this part.
  }
  return total;
}

}  // namespace cairn::ufs
