#include "worker/page_service.h"

#include <map>

#include <spdlog/spdlog.h>

#include <cstring>

namespace cairn::worker {

using protocol::ByteRange;
using protocol::PageSource;
using protocol::ReadPageRequest;

// One UFS fetch of a page, shared by every request that misses on it while it runs and while
// its bytes are being written to the page store.
struct PageService::Fetch {
  Mutex mu;
  CondVar cv;
  bool done GUARDED_BY(mu) = false;
  // The page is written to the store (or will not be: failed fetch, no-cache read, write
  // error). Loads wait for it.
  bool stored GUARDED_BY(mu) = false;
  Status status GUARDED_BY(mu);
  std::shared_ptr<const PageBytes> page;  // Set before done; immutable after.
  std::vector<uint64_t> checksums;          // Of the whole page; immutable after done.
};

// Per-mount series (label mount="/lake"), made on a mount's first request.
struct MountMetrics {
  MountMetrics(metrics::Registry* r, const std::string& mount)
      : requests(r->AddCounter("cairn_mount_requests_total", "Page reads received, by mount",
                               {{"mount", mount}})),
        hits(r->AddCounter("cairn_mount_cache_hits_total", "Page reads served from the cache",
                           {{"mount", mount}})),
        misses(r->AddCounter("cairn_mount_cache_misses_total",
                             "Page reads that went to the source", {{"mount", mount}})),
        bytes_from_cache(r->AddCounter("cairn_mount_bytes_from_cache_total",
                                       "Bytes served from cached pages (egress saved)",
                                       {{"mount", mount}})),
        bytes_from_ufs(r->AddCounter("cairn_mount_bytes_from_ufs_total",
                                     "Bytes read from the source (egress)", {{"mount", mount}})),
        ufs_requests(r->AddCounter("cairn_mount_ufs_requests_total",
                                   "Read requests sent to the source (cost)",
                                   {{"mount", mount}})),
        freed(r->AddCounter("cairn_mount_removals_total",
                            "Pages that left the cache, by mount and reason (capacity/quota: "
                            "evicted; ttl: expired; freed: cairn free)",
                            {{"mount", mount}, {"reason", "freed"}})) {}
  metrics::Counter* requests;
  metrics::Counter* hits;
  metrics::Counter* misses;
  metrics::Counter* bytes_from_cache;
  metrics::Counter* bytes_from_ufs;
  metrics::Counter* ufs_requests;
  metrics::Counter* freed;
};

struct PageService::Metrics {
  explicit Metrics(metrics::Registry* r)
      : requests(r->AddCounter("cairn_worker_requests_total", "Page read requests received")),
        hits(r->AddCounter("cairn_worker_cache_hits_total", "Page reads served from the cache")),
        misses(r->AddCounter("cairn_worker_cache_misses_total",
                             "Page reads that went to the under-storage")),
        coalesced(r->AddCounter("cairn_worker_coalesced_misses_total",
                                "Misses that joined an in-flight fetch of the same page")),
        errors(r->AddCounter("cairn_worker_request_errors_total", "Page reads that failed")),
        bytes_from_cache(r->AddCounter("cairn_worker_bytes_from_cache_total",
                                       "Bytes served from cached pages")),
        bytes_from_ufs(r->AddCounter("cairn_worker_bytes_from_ufs_total",
                                     "Bytes read from the under-storage")),
        ufs_requests(r->AddCounter("cairn_worker_ufs_requests_total",
                                   "Read requests sent to the under-storage")),
        ufs_errors(r->AddCounter("cairn_worker_ufs_errors_total",
                                 "Under-storage reads that failed")),
        checksum_failures(r->AddCounter(
            "cairn_worker_checksum_failures_total",
            "Cached pages reported corrupt by a client's end-to-end checksum check")),
        store_failures(r->AddCounter("cairn_worker_store_failures_total",
                                     "Fetched pages that could not be written to the cache")),
        hit_latency(r->AddHistogram("cairn_worker_read_latency_seconds",
                                    "Page read service time in the worker",
                                    metrics::LatencyBucketsSeconds(), {{"result", "hit"}})),
        miss_latency(r->AddHistogram("cairn_worker_read_latency_seconds",
                                     "Page read service time in the worker",
                                     metrics::LatencyBucketsSeconds(), {{"result", "miss"}})) {
    registry = r;
    load_requests = r->AddCounter("cairn_worker_load_requests_total",
                                  "Preload (load) requests received");
    loaded = r->AddCounter("cairn_worker_loaded_pages_total",
                           "Pages fetched from the under-storage by load requests");
    freed = r->AddCounter("cairn_worker_freed_pages_total", "Cached pages dropped by free requests");
    bypassed = r->AddCounter("cairn_worker_bypassed_misses_total",
                             "Misses served without caching (admission rule: bypass)");
    cache_only_misses = r->AddCounter(
        "cairn_worker_cache_only_misses_total",
        "Cache-only reads (replica lookups) that found the page missing");
  }
  // The per-mount series of `mount` (created on first use; never removed: mounts are few).
  MountMetrics* ForMount(const std::string& mount) {
    MutexLock l(&mount_mu);
    auto it = by_mount.find(mount);
    if (it == by_mount.end()) {
      it = by_mount.emplace(mount, std::make_unique<MountMetrics>(registry, mount)).first;
    }
    return it->second.get();
  }
  metrics::Registry* registry = nullptr;
  Mutex mount_mu;
  std::map<std::string, std::unique_ptr<MountMetrics>> by_mount GUARDED_BY(mount_mu);
  metrics::Counter* load_requests = nullptr;
  metrics::Counter* loaded = nullptr;
  metrics::Counter* freed = nullptr;
  metrics::Counter* cache_only_misses = nullptr;
  metrics::Counter* bypassed = nullptr;
  metrics::Counter* requests;
  metrics::Counter* hits;
  metrics::Counter* misses;
  metrics::Counter* coalesced;
  metrics::Counter* errors;
  metrics::Counter* bytes_from_cache;
  metrics::Counter* bytes_from_ufs;
  metrics::Counter* ufs_requests;
  metrics::Counter* ufs_errors;
  metrics::Counter* checksum_failures;
  metrics::Counter* store_failures;
  metrics::Histogram* hit_latency;
  metrics::Histogram* miss_latency;
};

namespace {

std::vector<uint64_t> ChecksumsOf(const std::vector<uint64_t>& all, ByteRange range) {
  size_t first = range.begin / kChecksumChunkSize;
  size_t last = first + ChunkCount(range.size());
  if (last > all.size()) last = all.size();
  return std::vector<uint64_t>(all.begin() + first, all.begin() + last);
}

}  // namespace

Status PageResult::CopyTo(std::span<char> dest) const {
  if (range.size() == 0) return Status::Ok();
  if (dest.size() != range.size()) return InternalError("destination size mismatch");
  if (page) {
    std::memcpy(dest.data(), page->data.get() + range.begin, range.size());
    return Status::Ok();
  }
  return reader->ReadAt(range.begin, dest);
}

PageService::PageService(std::shared_ptr<const mount::MountTable> mounts,
                         pagestore::PageStore* store, metrics::Registry* registry,
                         PageServiceOptions options)
    : mounts_(std::move(mounts)),
      store_(store),
      options_(std::move(options)),
      metrics_(std::make_unique<Metrics>(registry)),
      store_pool_(std::make_unique<ThreadPool>(options_.store_threads, "page-writer")) {}

PageService::~PageService() { store_pool_.reset(); }  // Finish queued page writes first.

ServiceStats PageService::Stats() const {
  ServiceStats s;
  s.requests = metrics_->requests->value();
  s.hits = metrics_->hits->value();
  s.misses = metrics_->misses->value();
  s.bytes_from_cache = metrics_->bytes_from_cache->value();
  s.bytes_from_ufs = metrics_->bytes_from_ufs->value();
  s.ufs_requests = metrics_->ufs_requests->value();
  s.checksum_failures = metrics_->checksum_failures->value();
  return s;
}

void PageService::SetMountTable(std::shared_ptr<const mount::MountTable> mounts) {
  {
    MutexLock l(&mounts_mu_);
    mounts_ = std::move(mounts);
  }
  mounts_cv_.NotifyAll();
}

StatusOr<const mount::Mount*> PageService::FindMount(
    const std::string& path, std::shared_ptr<const mount::MountTable>* table) {
  MutexLock l(&mounts_mu_);
  auto found = mounts_->FindByPath(path);
  // In a cluster a client may know a new mount a moment before this worker does (each watches
  // etcd on its own): wait briefly for the table to catch up instead of failing the read.
  if (!found.ok() && options_.unknown_mount_wait.count() > 0) {
    auto deadline = std::chrono::steady_clock::now() + options_.unknown_mount_wait;
    while (!found.ok()) {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      std::shared_ptr<const mount::MountTable> before = mounts_;
      mounts_cv_.WaitFor(&mounts_mu_, left,
                         [&]() REQUIRES(mounts_mu_) { return mounts_ != before; });
      found = mounts_->FindByPath(path);
    }
  }
  *table = mounts_;
  if (!found.ok()) {
    return UnavailableError("worker " + options_.worker_id + " has no mount " + path);
  }
  return found;
}

std::shared_ptr<const mount::MountTable> PageService::mount_table() const {
  MutexLock l(&mounts_mu_);
  return mounts_;
}

bool PageService::LikelyCached(const ReadPageRequest& request) {
  std::shared_ptr<const mount::MountTable> mounts = mount_table();
  auto mount = mounts->FindByPath(request.mount);
  if (!mount.ok()) return false;
  return store_->Contains({(*mount)->ObjectId(request.key), request.version, request.page_index});
}

void PageService::DropCachedPage(const ReadPageRequest& request) {
  std::shared_ptr<const mount::MountTable> mounts = mount_table();
  auto mount = mounts->FindByPath(request.mount);
  if (!mount.ok()) return;
  spdlog::warn("cached page {} of {} failed while being read; dropping it", request.page_index,
               (*mount)->ObjectId(request.key));
  store_->Remove({(*mount)->ObjectId(request.key), request.version, request.page_index},
                 pagestore::RemoveReason::kCorrupt)
      .IgnoreError();
}

StatusOr<bool> PageService::ControlPage(const ReadPageRequest& request) {
  uint32_t control = request.flags & protocol::kControlFlags;
  if (control != protocol::kFlagLoad && control != protocol::kFlagProbe &&
      control != protocol::kFlagDrop) {
    return InvalidArgumentError("a control request needs exactly one of load, probe, drop");
  }
  if (request.page_size != options_.page_size) {
    return InvalidArgumentError("page size mismatch: client uses " +
                                std::to_string(request.page_size) + ", worker " +
                                std::to_string(options_.page_size));
  }
  std::shared_ptr<const mount::MountTable> mounts;
  auto mount = FindMount(request.mount, &mounts);
  if (!mount.ok()) return mount.status();
  uint32_t page_length = protocol::PageLength(request.object_size, request.page_index,
                                              request.page_size);
  if (page_length == 0) return InvalidArgumentError("page past end of object");
  pagestore::PageKey key{(*mount)->ObjectId(request.key), request.version, request.page_index};
  bool cached = store_->Contains(key);
  if (control == protocol::kFlagProbe) return cached;
  if (control == protocol::kFlagDrop) {
    if (!cached) return false;
    Status removed = store_->Remove(key, pagestore::RemoveReason::kFreed);
    if (removed.code() == StatusCode::kNotFound) return false;  // Evicted meanwhile.
    CAIRN_RETURN_IF_ERROR(removed);
    metrics_->freed->Increment();
    metrics_->ForMount(request.mount)->freed->Increment();
    return true;
  }
  metrics_->load_requests->Increment();
  if (cached) {
    // Opening counts as a use: a page preloaded again right before a job is fresh, not the
    // next victim.
    if (store_->Open(key).ok()) return true;
  }
  ReadPageRequest load = request;
  load.flags = 0;
  load.offset = 0;
  load.length = 1;
  auto fetch = FetchPage(**mount, key, load, page_length);
  if (!fetch.ok()) return fetch.status();
  metrics_->loaded->Increment();
  // A load is done when the page is on disk: wait for the background write to finish.
  {
    MutexLock l(&(*fetch)->mu);
    (*fetch)->cv.Wait(&(*fetch)->mu, [&]() REQUIRES((*fetch)->mu) { return (*fetch)->stored; });
  }
  // The write can fail (a folder full of pinned pages, a mount over its quota, a disk error):
  // then the page is not cached and the load must say so.
  if (!store_->Contains(key)) {
    return ResourceExhaustedError("page " + std::to_string(request.page_index) + " of " +
                                  request.key + " was read but could not be cached on worker " +
                                  options_.worker_id + " (full of pinned pages, over quota, or "
                                  "a disk error: see its log)");
  }
  return false;
}

StatusOr<PageResult> PageService::ReadPage(const ReadPageRequest& request) {
  int64_t start = options_.clock->NowMicros();
  metrics_->requests->Increment();
  if (request.page_size != options_.page_size) {
    metrics_->errors->Increment();
    return InvalidArgumentError("page size mismatch: client uses " +
                                std::to_string(request.page_size) + ", worker " +
                                std::to_string(options_.page_size));
  }
  // Held for the whole request: the fetch below uses the mount's under-storage.
  std::shared_ptr<const mount::MountTable> mounts;
  auto mount = FindMount(request.mount, &mounts);
  if (!mount.ok()) {
    metrics_->errors->Increment();
    // Not "no such file": in a cluster this worker may not have seen a new mount yet.
    return mount.status();
  }
  MountMetrics* per_mount = metrics_->ForMount(request.mount);
  per_mount->requests->Increment();
  uint32_t page_length = protocol::PageLength(request.object_size, request.page_index,
                                              request.page_size);
  if (page_length == 0 || request.offset >= page_length) {
    metrics_->errors->Increment();
    return InvalidArgumentError("page range past end of object");
  }
  pagestore::PageKey key{(*mount)->ObjectId(request.key), request.version, request.page_index};

  if (request.flags & protocol::kFlagRefetch) {
    metrics_->checksum_failures->Increment();
    store_->Remove(key, pagestore::RemoveReason::kCorrupt).IgnoreError();
  } else {
    auto cached = ServeFromCache(key, page_length, request);
    if (cached.ok()) {
      metrics_->hits->Increment();
      metrics_->bytes_from_cache->Increment(cached->range.size());
      per_mount->hits->Increment();
      per_mount->bytes_from_cache->Increment(cached->range.size());
      metrics_->hit_latency->Observe((options_.clock->NowMicros() - start) / 1e6);
      return cached;
    }
  }

  if (request.flags & protocol::kFlagCacheOnly) {
    // A replica lookup: the client asks the other replicas before paying for the source.
    metrics_->cache_only_misses->Increment();
    PageResult none;
    none.source = PageSource::kUnderStorage;
    return none;  // Empty range: "not cached here".
  }
  metrics_->misses->Increment();
  per_mount->misses->Increment();
  ReadPageRequest admitted = request;
  if (options_.rules != nullptr &&
      options_.rules->AdmissionFor(request.mount, request.key) == policy::Admission::kBypass) {
    admitted.flags |= protocol::kFlagNoCache;  // A one-pass path: serve, do not keep.
    metrics_->bypassed->Increment();
  }
  auto fetch = FetchPage(**mount, key, admitted, page_length);
  if (!fetch.ok()) {
    metrics_->errors->Increment();
    return fetch.status();
  }
  PageResult result;
  result.source = PageSource::kUnderStorage;
  result.range = protocol::AlignedRange(request.offset, request.length, page_length);
  result.checksums = ChecksumsOf((*fetch)->checksums, result.range);
  result.page = (*fetch)->page;
  metrics_->miss_latency->Observe((options_.clock->NowMicros() - start) / 1e6);
  return result;
}

StatusOr<PageResult> PageService::ServeFromCache(const pagestore::PageKey& key,
                                                 uint32_t page_length,
                                                 const ReadPageRequest& request) {
  auto reader = store_->Open(key);
  if (!reader.ok()) return reader.status();
  if ((*reader)->data_length() != page_length) {
    // Same key, different length: the page was written for another object size. Never serve.
    store_->Remove(key, pagestore::RemoveReason::kCorrupt).IgnoreError();
    return CorruptionError("cached page length does not match the object size");
  }
  PageResult result;
  result.source = PageSource::kCache;
  result.range = protocol::AlignedRange(request.offset, request.length, page_length);
  result.checksums = ChecksumsOf((*reader)->chunk_checksums(), result.range);
  result.reader = std::move(reader).value();
  return result;
}

StatusOr<std::shared_ptr<PageService::Fetch>> PageService::FetchPage(
    const mount::Mount& mount, const pagestore::PageKey& key, const ReadPageRequest& request,
    uint32_t page_length) {
  Hash128 id = key.Id();
  std::shared_ptr<Fetch> fetch;
  bool leader = false;
  {
    MutexLock l(&mu_);
    auto it = in_flight_.find(id);
    if (it != in_flight_.end()) {
      fetch = it->second;
    } else {
      fetch = std::make_shared<Fetch>();
      in_flight_.emplace(id, fetch);
      leader = true;
    }
  }
  if (!leader) {
    metrics_->coalesced->Increment();
    MutexLock l(&fetch->mu);
    fetch->cv.Wait(&fetch->mu, [&]() REQUIRES(fetch->mu) { return fetch->done; });
    if (!fetch->status.ok()) return fetch->status;
    return fetch;
  }

  auto bytes = std::make_shared<PageBytes>(page_length);
  metrics_->ufs_requests->Increment();
  MountMetrics* per_mount = metrics_->ForMount(mount.spec.path);
  per_mount->ufs_requests->Increment();
  uint64_t offset = request.page_index * request.page_size;
  auto n = mount.ufs->Read(request.key, request.version, offset, bytes->span());
  Status status;
  if (!n.ok()) {
    status = n.status();
  } else if (*n != page_length) {
    status = FailedPreconditionError("object " + request.key + " is shorter than its size at open");
  }
  if (status.ok()) {
    metrics_->bytes_from_ufs->Increment(page_length);
    per_mount->bytes_from_ufs->Increment(page_length);
    fetch->checksums = ChunkChecksums(bytes->span());
    fetch->page = std::move(bytes);
  } else {
    metrics_->ufs_errors->Increment();
    spdlog::warn("UFS read of {} page {} failed: {}", mount.ObjectId(request.key),
                 request.page_index, status.ToString());
  }
  {
    MutexLock l(&fetch->mu);
    fetch->done = true;
    fetch->status = status;
  }
  fetch->cv.NotifyAll();
  if (!status.ok()) {
    Retire(id);
    return status;
  }
  if (request.flags & protocol::kFlagNoCache) {
    Retire(id);
  } else if (pending_stores_.fetch_add(1) < options_.max_pending_stores) {
    store_pool_->Submit([this, key, fetch] {
      StoreAndRetire(key, fetch);
      pending_stores_.fetch_sub(1);
    });
  } else {
    StoreAndRetire(key, fetch);  // Writers are behind: push back on this reader instead.
    pending_stores_.fetch_sub(1);
  }
  return fetch;
}

size_t PageService::FetchesInFlight() {
  MutexLock l(&mu_);
  return in_flight_.size();
}

void PageService::StoreAndRetire(const pagestore::PageKey& key, std::shared_ptr<Fetch> fetch) {
  Status s = store_->PutWithChecksums(key, fetch->page->span(), fetch->checksums);
  if (!s.ok()) {
    metrics_->store_failures->Increment();
    spdlog::warn("caching page {} of {} failed: {}", key.page_index, key.object_id,
                 s.ToString());
  }
  Retire(key.Id());
}

void PageService::Retire(const Hash128& id) {
  std::shared_ptr<Fetch> fetch;
  {
    MutexLock l(&mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    fetch = std::move(it->second);
    in_flight_.erase(it);
  }
  {
    MutexLock l(&fetch->mu);
    fetch->stored = true;
  }
  fetch->cv.NotifyAll();
}

}  // namespace cairn::worker
