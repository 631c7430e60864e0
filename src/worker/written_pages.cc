#include "worker/written_pages.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/checksum.h"

namespace cairn::worker {

struct WrittenPages::Metrics {
  explicit Metrics(metrics::Registry* r)
      : pages(r->AddCounter("cairn_worker_written_pages_cached_total",
                            "Pages of files written through this worker stored in its cache "
                            "(as one of their replicas)")),
        copies(r->AddCounter("cairn_worker_written_pages_copied_total",
                             "Pages of files written through this worker copied by their other "
                             "replicas")),
        failures(r->AddCounter("cairn_worker_written_pages_failed_total",
                               "Pages of written files that could not be stored or copied")),
        skipped(r->AddCounter("cairn_worker_written_files_skipped_total",
                              "Written files not cached (too many bytes queued, or stopping)")),
        pending(r->AddGauge("cairn_worker_written_pending_bytes",
                            "Bytes of written files waiting to enter the cache")) {}
  std::unique_ptr<metrics::Registry> owned;
  metrics::Counter* pages;
  metrics::Counter* copies;
  metrics::Counter* failures;
  metrics::Counter* skipped;
  metrics::Gauge* pending;
};

// The copies in flight of one file: the file is done when none is.
struct WrittenPages::Window {
  Mutex mu;
  CondVar cv;
  size_t in_flight GUARDED_BY(mu) = 0;
};

namespace {

// Reads exactly out.size() bytes at `offset`; a short file reads as zeros (a hole at the end of a
// sparse spool).
Status ReadFull(int fd, uint64_t offset, std::span<char> out) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "read spool");
    if (n == 0) {
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(done), out.end(), '\0');
      return Status::Ok();
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

WrittenPages::WrittenPages(PageService* pages, WrittenPagesOptions options)
    : pages_(pages), options_(std::move(options)) {
  metrics::Registry* registry = options_.registry;
  std::unique_ptr<metrics::Registry> owned;
  if (registry == nullptr) {
    owned = std::make_unique<metrics::Registry>();
    registry = owned.get();
  }
  metrics_ = std::make_unique<Metrics>(registry);
  metrics_->owned = std::move(owned);
  thread_ = std::thread([this] { Loop(); });
}

WrittenPages::~WrittenPages() {
  std::deque<Job> dropped;
  {
    MutexLock l(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  changed_.NotifyAll();
  thread_.join();
  for (const Job& job : dropped) ::close(job.fd);
}

bool WrittenPages::Admit(WrittenFile file, int spool_fd) {
  const PageRules* rules = pages_->options().rules;
  const bool bypass = rules != nullptr && rules->AdmissionFor(file.mount->spec.path, file.key) ==
                                              policy::Admission::kBypass;
  if (file.size == 0 || bypass) {
    ::close(spool_fd);
    return false;
  }
  uint64_t queued = 0;
  {
    MutexLock l(&mu_);
    const uint64_t cap = options_.max_pending_bytes;
    const bool room =
        pending_bytes_ == 0 || (pending_bytes_ <= cap && file.size <= cap - pending_bytes_);
    if (!stopping_ && room) {
      pending_bytes_ += file.size;
      metrics_->pending->Set(static_cast<double>(pending_bytes_));
      queue_.push_back(Job{std::move(file), spool_fd});
      changed_.NotifyAll();
      return true;
    }
    ++stats_.files_skipped;
    queued = pending_bytes_;
  }
  metrics_->skipped->Increment();
  spdlog::info("the written file {} does not enter the cache: {} bytes of written files wait",
               file.key, queued);
  ::close(spool_fd);
  return false;
}

void WrittenPages::WaitIdle() {
  MutexLock l(&mu_);
  changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return stopping_ || (queue_.empty() && !busy_); });
}

WrittenPagesStats WrittenPages::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

bool WrittenPages::stopping() const {
  MutexLock l(&mu_);
  return stopping_;
}

void WrittenPages::Count(uint64_t WrittenPagesStats::*field) {
  MutexLock l(&mu_);
  ++(stats_.*field);
}

void WrittenPages::Loop() {
  MutexLock l(&mu_);
  while (true) {
    changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    ++stats_.files;
    mu_.Unlock();
    CacheFile(job);
    ::close(job.fd);
    mu_.Lock();
    busy_ = false;
    pending_bytes_ -= job.file.size;
    metrics_->pending->Set(static_cast<double>(pending_bytes_));
    changed_.NotifyAll();
  }
}

void WrittenPages::CacheFile(const Job& job) {
  const uint32_t page_size = pages_->page_size();
  const uint64_t page_count = (job.file.size - 1) / page_size + 1;  // size > 0 (Admit).
  const PageRules* rules = pages_->options().rules;
  const policy::Priority priority =
      rules != nullptr ? rules->WrittenPriority(job.file.mount->spec.path, job.file.key)
                       : policy::Priority::kLow;
  std::vector<char> buffer(page_size);
  Window window;
  for (uint64_t index = 0; index < page_count && !stopping(); ++index) {
    const uint64_t offset = index * page_size;
    const auto length = static_cast<size_t>(std::min<uint64_t>(page_size, job.file.size - offset));
    std::span<char> data(buffer.data(), length);
    if (Status s = ReadFull(job.fd, offset, data); !s.ok()) {
      spdlog::warn("caching the written file {}: {}", job.file.key, s.ToString());
      metrics_->failures->Increment();
      Count(&WrittenPagesStats::pages_failed);
      break;
    }
    CachePage(job, index, data, priority, window);
  }
  // The copies read this worker's copy of their page: wait for them before the spool goes.
  MutexLock l(&window.mu);
  window.cv.Wait(&window.mu, [&]() REQUIRES(window.mu) { return window.in_flight == 0; });
}

void WrittenPages::CachePage(const Job& job, uint64_t index, std::span<const char> data,
                             policy::Priority priority, Window& window) {
  const std::string& self = pages_->worker_id();
  pagestore::PageKey key{job.file.mount->ObjectId(job.file.key), job.file.version, index};
  std::vector<std::string> replicas = pages_->ReplicasOf(*job.file.mount, key);
  const bool mine = std::find(replicas.begin(), replicas.end(), self) != replicas.end();
  std::vector<std::shared_ptr<protocol::PageChannel>> others;
  const PeerSet* peers = pages_->options().peers;
  for (const std::string& id : replicas) {
    if (id == self || peers == nullptr) continue;
    if (auto channel = peers->Get(id)) others.push_back(std::move(channel));
  }
  if (!mine && others.empty()) return;

  const std::vector<uint64_t> checksums = ChunkChecksums(data);
  pagestore::PageStore* store = pages_->store();
  if (Status s = store->PutWithPriority(key, data, checksums, priority); !s.ok()) {
    // Without this copy the other replicas would read the source: leave the page to its readers.
    spdlog::debug("caching page {} of the written file {}: {}", index, job.file.key, s.ToString());
    metrics_->failures->Increment();
    Count(&WrittenPagesStats::pages_failed);
    return;
  }
  if (mine) {
    metrics_->pages->Increment();
    Count(&WrittenPagesStats::pages_cached);
  }
  if (others.empty()) return;

  protocol::CopyFromPeerRequest copy;
  copy.page = protocol::PageRef{
      job.file.mount->spec.path, job.file.key, job.file.version, job.file.size, index,
      pages_->page_size()};
  copy.peer = self;
  copy.deadline_ms = static_cast<uint32_t>(options_.copy_timeout.count());
  // The last copy of a page this worker is no replica of removes this worker's copy.
  auto left = std::make_shared<std::atomic<size_t>>(others.size());
  for (const auto& channel : others) {
    {
      MutexLock l(&window.mu);
      window.cv.Wait(&window.mu, [&]() REQUIRES(window.mu) {
        return window.in_flight < std::max<size_t>(1, options_.max_copies_in_flight);
      });
      ++window.in_flight;
    }
    channel->Call(copy, {},
                  [this, &window, left, key, mine, store](StatusOr<protocol::PageReply> reply) {
                    if (reply.ok()) {
                      metrics_->copies->Increment();
                      Count(&WrittenPagesStats::pages_copied);
                    } else {
                      spdlog::debug("copy of written page {}#{} failed: {}", key.object_id,
                                    key.page_index, reply.status().ToString());
                      metrics_->failures->Increment();
                      Count(&WrittenPagesStats::pages_failed);
                    }
                    if (left->fetch_sub(1) == 1 && !mine) {
                      store->Remove(key, pagestore::RemoveReason::kFreed).IgnoreError();
                    }
                    // Last: CacheFile returns (and `window` goes) once in_flight is 0.
                    MutexLock l(&window.mu);
                    --window.in_flight;
                    window.cv.NotifyAll();
                  });
  }
}

}  // namespace cairn::worker
