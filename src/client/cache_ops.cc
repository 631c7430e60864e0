#include "client/cache_ops.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "common/thread_annotations.h"
#include "mount/mount_table.h"
#include "protocol/wire.h"

namespace cairn::client {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes-per-second budget with debt: a request is sent while the balance is not negative and
// then charged; refunds (pages that were cached) come back. Long-run rate <= rate + burst/T.
class TokenBucket {
 public:
  TokenBucket(uint64_t rate, uint64_t burst)
      : rate_(static_cast<double>(rate)),
        burst_(static_cast<double>(burst)),
        tokens_(burst_),
        last_(Clock::now()) {}
  bool unlimited() const { return rate_ <= 0; }
  // How long until the balance is not negative (0 = now). Refills first.
  std::chrono::microseconds WaitNeeded() {
    Refill();
    if (tokens_ >= 0) return std::chrono::microseconds(0);
    return std::chrono::microseconds(static_cast<int64_t>(-tokens_ / rate_ * 1e6) + 1);
  }
  void Charge(double bytes) { tokens_ -= bytes; }
  void Refund(double bytes) { tokens_ = std::min(burst_, tokens_ + bytes); }

 private:
  void Refill() {
    auto now = Clock::now();
    double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    tokens_ = std::min(burst_, tokens_ + seconds * rate_);
  }
  double rate_, burst_, tokens_;
  Clock::time_point last_;
};

// State shared by the walking thread and the reply callbacks.
struct Shared {
  Mutex mu;
  CondVar cv;
  int in_flight GUARDED_BY(mu) = 0;
  LoadProgress progress GUARDED_BY(mu);
  uint64_t refund GUARDED_BY(mu) = 0;  // Bytes to give back to the token bucket.
};

struct FileState {
  std::string path;
  uint64_t pages_left;
  bool missing = false;
};

void ClassifyLoad(const PageFetcher::ControlResult& r, uint32_t page_length, bool verify,
                  LoadProgress* p, uint64_t* refund, FileState* file) {
  if (r.sent == 0 || r.failed > 0) {
    ++p->pages_failed;
    if (p->first_error.empty()) {
      p->first_error = r.sent == 0 ? "no worker to load it" : r.first_error.ToString();
    }
    *refund += uint64_t{page_length} * static_cast<uint64_t>(r.failed);  // Nothing read there.
  }
  if (r.sent == 0) return;
  if (verify) {
    if (r.was_cached < r.sent) {
      ++p->pages_missing;
      file->missing = true;
    }
    return;
  }
  if (r.failed > 0) return;
  // Copies made from a replica cost the source nothing: refund them too.
  *refund += uint64_t{page_length} * static_cast<uint64_t>(r.was_cached + r.from_peer);
  if (r.was_cached == r.sent) {
    ++p->pages_cached_before;
  } else {
    ++p->pages_loaded;
    p->bytes_from_source +=
        uint64_t{page_length} * static_cast<uint64_t>(r.sent - r.was_cached - r.from_peer);
  }
}

}  // namespace

StatusOr<LoadProgress> RunLoad(const CacheOpsContext& ctx, std::string_view raw_path,
                               const LoadOptions& options,
                               const std::function<void(const LoadProgress&)>& progress) {
  if (options.parallelism < 1) return InvalidArgumentError("parallelism must be at least 1");
  if (options.replicas < 0) return InvalidArgumentError("replicas must be 0 (the mount's) or more");
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  if (ctx.fetcher->workers().empty()) {
    return UnavailableError("no cache workers: nothing could hold the loaded pages");
  }
  const uint32_t page_size = ctx.fetcher->page_size();
  const auto start = Clock::now();
  auto shared = std::make_shared<Shared>();
  TokenBucket bucket(options.max_bytes_per_second,
                     std::max<uint64_t>(options.max_bytes_per_second / 8, page_size));
  auto last_report = start;
  auto report = [&](bool force) {
    auto now = Clock::now();
    if (!progress || (!force && now - last_report < std::chrono::milliseconds(250))) return;
    last_report = now;
    LoadProgress copy;
    {
      MutexLock l(&shared->mu);
      shared->progress.elapsed_seconds = std::chrono::duration<double>(now - start).count();
      copy = shared->progress;
    }
    progress(copy);
  };
  auto cancelled = [&] { return options.cancel != nullptr && options.cancel->load(); };

  // Sends one page: waits for a slot and for the byte budget, then the control request(s).
  auto send_page = [&](const ObjectRef& object, uint64_t page, int copies,
                       std::shared_ptr<FileState> file) {
    uint32_t page_length = protocol::PageLength(object.info.size, page, page_size);
    while (true) {
      std::chrono::microseconds wait(0);
      {
        MutexLock l(&shared->mu);
        bucket.Refund(static_cast<double>(shared->refund));
        shared->refund = 0;
        if (shared->in_flight < options.parallelism) {
          wait = options.verify_only || bucket.unlimited() ? std::chrono::microseconds(0)
                                                           : bucket.WaitNeeded();
          if (wait.count() == 0) {
            ++shared->in_flight;
            break;
          }
        }
        if (wait.count() == 0) {
          // All slots busy: wake as soon as a reply frees one (or to report progress).
          shared->cv.WaitFor(
              &shared->mu, std::chrono::milliseconds(250),
              [&]() REQUIRES(shared->mu) { return shared->in_flight < options.parallelism; });
        } else {
          // Over the byte budget: wait for it to refill, or for a refund (a cached page).
          auto step = std::min<std::chrono::microseconds>(wait, std::chrono::milliseconds(250));
          shared->cv.WaitFor(&shared->mu, step,
                             [&]() REQUIRES(shared->mu) { return shared->refund > 0; });
        }
      }
      report(false);
      if (cancelled()) return false;
    }
    if (!options.verify_only) bucket.Charge(double(page_length) * copies);
    auto finish = [shared, file, page_length,
                   verify = options.verify_only](const PageFetcher::ControlResult& r) {
      {
        MutexLock l(&shared->mu);
        LoadProgress& p = shared->progress;
        ClassifyLoad(r, page_length, verify, &p, &shared->refund, file.get());
        ++p.pages_done;
        p.bytes_done += page_length;
        if (--file->pages_left == 0) {
          ++p.files_done;
          if (file->missing && p.missing_files.size() < 100) p.missing_files.push_back(file->path);
        }
        --shared->in_flight;
      }
      shared->cv.NotifyAll();
    };
    PageFetcher* fetcher = ctx.fetcher;
    if (options.verify_only) {
      fetcher->Control(object, page, PageFetcher::ControlOp::kProbe, copies, finish);
    } else if (options.skip_cached) {
      // Ask first; load only where a copy is missing, so cached pages are not touched.
      fetcher->Control(
          object, page, PageFetcher::ControlOp::kProbe, copies,
          [fetcher, object, page, copies, finish](const PageFetcher::ControlResult& r) {
            if (r.sent > 0 && r.failed == 0 && r.was_cached == r.sent) {
              finish(r);
              return;
            }
            fetcher->Control(object, page, PageFetcher::ControlOp::kLoad, copies, finish);
          });
    } else {
      fetcher->Control(object, page, PageFetcher::ControlOp::kLoad, copies, finish);
    }
    return true;
  };

  Status walked =
      WalkFiles(ctx.client, path, [&](const std::string& file_path, const FileInfo& info) {
        if (cancelled()) return false;
        auto object = ctx.resolve(file_path, info);
        if (!object.ok()) return true;  // Vanished or moved meanwhile: skip it.
        uint64_t pages = (info.size + page_size - 1) / page_size;
        int copies = options.replicas > 0 ? options.replicas : object->mount->spec.replicas;
        {
          MutexLock l(&shared->mu);
          ++shared->progress.files_total;
          shared->progress.bytes_total += info.size;
          shared->progress.pages_total += pages;
          if (pages == 0) ++shared->progress.files_done;
        }
        if (pages == 0) return true;
        auto file = std::make_shared<FileState>(FileState{file_path, pages});
        for (uint64_t p = 0; p < pages; ++p) {
          if (!send_page(*object, p, copies, file)) return false;
        }
        report(false);
        return true;
      });
  {
    MutexLock l(&shared->mu);
    shared->progress.listing_done = walked.ok() && !cancelled();
    shared->progress.cancelled = cancelled();
  }
  // Wait for the pages in flight (they finish even when cancelled: a half-sent load is fine).
  while (true) {
    {
      MutexLock l(&shared->mu);
      if (shared->in_flight == 0) break;
      shared->cv.WaitFor(&shared->mu, std::chrono::milliseconds(250),
                         [&]() REQUIRES(shared->mu) { return shared->in_flight == 0; });
    }
    report(false);
  }
  if (!walked.ok()) return walked;
  report(true);
  MutexLock l(&shared->mu);
  shared->progress.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return shared->progress;
}

StatusOr<FreeResult> RunFree(const CacheOpsContext& ctx, std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  const uint32_t page_size = ctx.fetcher->page_size();
  constexpr int kInFlight = 64;
  auto shared = std::make_shared<Shared>();
  auto result = std::make_shared<FreeResult>();  // Guarded by shared->mu.
  Status walked =
      WalkFiles(ctx.client, path, [&](const std::string& file_path, const FileInfo& info) {
        auto object = ctx.resolve(file_path, info);
        if (!object.ok()) return true;
        {
          MutexLock l(&shared->mu);
          ++result->files;
        }
        uint64_t pages = (info.size + page_size - 1) / page_size;
        for (uint64_t p = 0; p < pages; ++p) {
          {
            MutexLock l(&shared->mu);
            shared->cv.Wait(&shared->mu,
                            [&]() REQUIRES(shared->mu) { return shared->in_flight < kInFlight; });
            ++shared->in_flight;
          }
          // Every worker: after ring changes a page may sit on any of them.
          ctx.fetcher->Control(*object, p, PageFetcher::ControlOp::kDrop, 0,
                               [shared, result](const PageFetcher::ControlResult& r) {
                                 {
                                   MutexLock l(&shared->mu);
                                   result->pages_dropped += static_cast<uint64_t>(r.was_cached);
                                   result->failures += static_cast<uint64_t>(r.failed);
                                   --shared->in_flight;
                                 }
                                 shared->cv.NotifyAll();
                               });
        }
        return true;
      });
  {
    MutexLock l(&shared->mu);
    shared->cv.Wait(&shared->mu, [&]() REQUIRES(shared->mu) { return shared->in_flight == 0; });
  }
  if (!walked.ok()) return walked;
  MutexLock l(&shared->mu);
  return *result;
}

}  // namespace cairn::client

namespace cairn {

Status WalkFiles(Client* client, std::string_view raw_path,
                 const std::function<bool(const std::string&, const FileInfo&)>& visit) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  CAIRN_ASSIGN_OR_RETURN(FileInfo root, client->Stat(path));
  if (!root.is_dir) {
    visit(path, root);
    return Status::Ok();
  }
  std::vector<std::string> stack{path};
  while (!stack.empty()) {
    std::string dir = std::move(stack.back());
    stack.pop_back();
    std::string token;
    std::vector<std::string> subdirs;
    do {
      CAIRN_ASSIGN_OR_RETURN(DirPage page, client->ListDir(dir, token, 1000));
      for (const FileInfo& e : page.entries) {
        std::string child = dir == "/" ? "/" + e.name : dir + "/" + e.name;
        if (e.is_dir) {
          subdirs.push_back(std::move(child));
        } else if (!visit(child, e)) {
          return Status::Ok();
        }
      }
      token = page.next_token;
    } while (!token.empty());
    // Reverse so folders are visited in name order.
    stack.insert(stack.end(), subdirs.rbegin(), subdirs.rend());
  }
  return Status::Ok();
}

}  // namespace cairn
