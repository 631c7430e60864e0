#include "worker/page_service.h"

#include <map>

#include <spdlog/spdlog.h>

#include <cstring>

#include "common/checksum.h"
#include "placement/ring.h"

namespace cairn::worker {

using protocol::ByteRange;
using protocol::PageRef;
using protocol::PageSource;

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
  std::shared_ptr<const PageBytes> page;          // Set before done; immutable after.
  std::vector<uint64_t> checksums;                // Of the whole page; immutable after done.
  PageSource origin = PageSource::kUnderStorage;  // Or kPeer; immutable after done.
};

// Per-mount series (label mount="/lake"), made on a mount's first request.
struct MountMetrics {
  MountMetrics(metrics::Registry* r, const std::string& mount)
      : requests(r->AddCounter("cairn_mount_requests_total", "Page reads received, by mount",
                               {{"mount", mount}})),
        hits(r->AddCounter("cairn_mount_cache_hits_total", "Page reads served from the cache",
                           {{"mount", mount}})),
        misses(r->AddCounter("cairn_mount_cache_misses_total", "Page reads that went to the source",
                             {{"mount", mount}})),
        bytes_from_cache(r->AddCounter("cairn_mount_bytes_from_cache_total",
                                       "Bytes served from cached pages (egress saved)",
                                       {{"mount", mount}})),
        bytes_from_ufs(r->AddCounter("cairn_mount_bytes_from_ufs_total",
                                     "Bytes read from the source (egress)", {{"mount", mount}})),
        ufs_requests(r->AddCounter("cairn_mount_ufs_requests_total",
                                   "Read requests sent to the source (cost)", {{"mount", mount}})),
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
                                "Misses that joined an in-flight fetch of the same page, or "
                                "found it stored by one that had just finished")),
        read_ahead_pages(
            r->AddCounter("cairn_worker_read_ahead_pages_total",
                          "Pages read from the source in the request of an earlier page's miss")),
        errors(r->AddCounter("cairn_worker_request_errors_total", "Page reads that failed")),
        bytes_from_cache(
            r->AddCounter("cairn_worker_bytes_from_cache_total", "Bytes served from cached pages")),
        bytes_from_ufs(r->AddCounter("cairn_worker_bytes_from_ufs_total",
                                     "Bytes read from the under-storage")),
        ufs_requests(r->AddCounter("cairn_worker_ufs_requests_total",
                                   "Read requests sent to the under-storage")),
        ufs_errors(
            r->AddCounter("cairn_worker_ufs_errors_total", "Under-storage reads that failed")),
        checksum_failures(
            r->AddCounter("cairn_worker_checksum_failures_total",
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
    load_requests =
        r->AddCounter("cairn_worker_load_requests_total", "Preload (load) requests received");
    loaded = r->AddCounter("cairn_worker_loaded_pages_total",
                           "Pages fetched from the under-storage by load requests");
    freed =
        r->AddCounter("cairn_worker_freed_pages_total", "Cached pages dropped by free requests");
    bypassed = r->AddCounter("cairn_worker_bypassed_misses_total",
                             "Misses served without caching (admission rule: bypass)");
    cache_only_misses =
        r->AddCounter("cairn_worker_cache_only_misses_total",
                      "Cache-only reads (replica lookups) that found the page missing");
    peer_fills = r->AddCounter("cairn_worker_peer_fills_total",
                               "Pages copied from a peer worker instead of the under-storage");
    bytes_from_peers = r->AddCounter("cairn_worker_bytes_from_peers_total",
                                     "Bytes copied from peer workers (not egress)");
    peer_serves = r->AddCounter("cairn_worker_peer_serves_total",
                                "Cached pages sent to peer workers filling their copy");
    bytes_to_peers = r->AddCounter("cairn_worker_bytes_to_peers_total",
                                   "Bytes of cached pages sent to peer workers");
    peer_fill_failures = r->AddCounter(
        "cairn_worker_peer_fill_failures_total",
        "Peer fills that fell back to the under-storage (peer unknown, down, slow, or without "
        "the page)");
    replica_lookups = r->AddCounter(
        "cairn_worker_replica_lookups_total",
        "Misses on a replicated mount that looked for the page on its other replicas first");
    replica_lookup_failures = r->AddCounter(
        "cairn_worker_replica_lookup_failures_total",
        "Replica lookups a peer could not answer (down, slow, unknown mount, bad bytes)");
    replica_copies =
        r->AddCounter("cairn_worker_replica_copies_total",
                      "Copy requests sent to replicas without a page this worker had just fetched");
    replica_copies_skipped =
        r->AddCounter("cairn_worker_replica_copies_skipped_total",
                      "Replica copies not sent because too many were in flight");
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
  metrics::Counter* peer_fills = nullptr;
  metrics::Counter* bytes_from_peers = nullptr;
  metrics::Counter* peer_fill_failures = nullptr;
  metrics::Counter* peer_serves = nullptr;
  metrics::Counter* bytes_to_peers = nullptr;
  metrics::Counter* bypassed = nullptr;
  metrics::Counter* replica_lookups = nullptr;
  metrics::Counter* replica_lookup_failures = nullptr;
  metrics::Counter* replica_copies = nullptr;
  metrics::Counter* replica_copies_skipped = nullptr;
  metrics::Counter* requests;
  metrics::Counter* hits;
  metrics::Counter* misses;
  metrics::Counter* coalesced;
  metrics::Counter* read_ahead_pages;
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

Status PageResult::Copy(std::span<char> dest, bool direct) const {
  if (range.size() == 0) return Status::Ok();
  if (dest.size() != range.size()) return InternalError("destination size mismatch");
  if (page) {
    std::memcpy(dest.data(), page->data.get() + range.begin, range.size());
    return Status::Ok();
  }
  return direct ? reader->ReadDirectAt(range.begin, dest) : reader->ReadAt(range.begin, dest);
}

Status PageResult::CopyTo(std::span<char> dest) const { return Copy(dest, /*direct=*/false); }

Status PageResult::CopyToBypassingPageCache(std::span<char> dest) const {
  return Copy(dest, /*direct=*/true);
}

PageService::PageService(std::shared_ptr<const mount::MountTable> mounts,
                         pagestore::PageStore* store, metrics::Registry* registry,
                         PageServiceOptions options)
    : store_(store),
      registry_(registry),
      options_(std::move(options)),
      metrics_(std::make_unique<Metrics>(registry)),
      store_pool_(std::make_unique<ThreadPool>(options_.store_threads, "page-writer")),
      replica_pool_(std::make_unique<ThreadPool>(2, "replica-copy")) {
  SetMountTable(std::move(mounts));
}

PageService::~PageService() {
  replica_pool_.reset();  // Queued copies are sent (their callbacks do not touch the service).
  store_pool_.reset();    // Finish queued page writes.
}

ServiceStats PageService::Stats() const {
  ServiceStats s;
  s.requests = metrics_->requests->value();
  s.hits = metrics_->hits->value();
  s.misses = metrics_->misses->value();
  s.bytes_from_cache = metrics_->bytes_from_cache->value();
  s.bytes_from_ufs = metrics_->bytes_from_ufs->value();
  s.ufs_requests = metrics_->ufs_requests->value();
  s.checksum_failures = metrics_->checksum_failures->value();
  s.peer_fills = metrics_->peer_fills->value();
  s.peer_fill_failures = metrics_->peer_fill_failures->value();
  s.peer_serves = metrics_->peer_serves->value();
  s.replica_lookups = metrics_->replica_lookups->value();
  s.replica_copies = metrics_->replica_copies->value();
  s.replica_copies_skipped = metrics_->replica_copies_skipped->value();
  s.coalesced = metrics_->coalesced->value();
  s.read_ahead_pages = metrics_->read_ahead_pages->value();
  return s;
}

std::shared_ptr<const PageService::MountMetricsMap> PageService::BindMetrics(
    const mount::MountTable& table) {
  auto bound = std::make_shared<MountMetricsMap>();
  for (const auto& m : table.mounts()) (*bound)[m->spec.path] = metrics_->ForMount(m->spec.path);
  return bound;
}

void PageService::SetMountTable(std::shared_ptr<const mount::MountTable> mounts) {
  std::shared_ptr<const MountMetricsMap> bound = BindMetrics(*mounts);
  {
    MutexLock l(&mounts_mu_);
    mounts_ = std::move(mounts);
    mount_metrics_ = std::move(bound);
  }
  mounts_cv_.NotifyAll();
}

template <typename Result, typename Lookup>
Result PageService::LookUpWaiting(Lookup lookup, bool wait) {
  Result found = lookup(*mounts_);
  // In a cluster a client may know a new mount a moment before this worker does (each watches
  // etcd on its own): wait briefly for the table to catch up instead of failing the request.
  if (found.ok() || !wait || options_.unknown_mount_wait.count() <= 0) return found;
  auto deadline = std::chrono::steady_clock::now() + options_.unknown_mount_wait;
  while (!found.ok()) {
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    std::shared_ptr<const mount::MountTable> before = mounts_;
    mounts_cv_.WaitFor(&mounts_mu_, left, [&]() REQUIRES(mounts_mu_) { return mounts_ != before; });
    found = lookup(*mounts_);
  }
  return found;
}

StatusOr<const mount::Mount*> PageService::FindMount(
    const std::string& path, std::shared_ptr<const mount::MountTable>* table,
    MountMetrics** metrics, bool wait) {
  MutexLock l(&mounts_mu_);
  auto found = LookUpWaiting<StatusOr<const mount::Mount*>>(
      [&](const mount::MountTable& t) { return t.FindByPath(path); }, wait);
  *table = mounts_;
  if (!found.ok()) {
    return UnavailableError("worker " + options_.worker_id + " has no mount " + path);
  }
  // Bound with the table: every mount of it has its series.
  auto bound = mount_metrics_->find((*found)->spec.path);
  *metrics = bound != mount_metrics_->end() ? bound->second : metrics_->ForMount(path);
  return found;
}

StatusOr<PageService::PathAt> PageService::ResolvePath(const std::string& path, bool wait) {
  MutexLock l(&mounts_mu_);
  auto found = LookUpWaiting<StatusOr<mount::Resolved>>(
      [&](const mount::MountTable& t) { return t.Resolve(path); }, wait);
  if (!found.ok()) {
    return UnavailableError("worker " + options_.worker_id + " has no mount for " + path);
  }
  return PathAt{mounts_, std::move(found).value()};
}

std::shared_ptr<const mount::MountTable> PageService::mount_table() const {
  MutexLock l(&mounts_mu_);
  return mounts_;
}

PageService::Route PageService::TryServeNow(const protocol::Request& request,
                                            StatusOr<Served>* served) {
  const bool cache_only = std::holds_alternative<protocol::LookupPageRequest>(request) ||
                          std::holds_alternative<protocol::PeerReadRequest>(request) ||
                          std::holds_alternative<protocol::ProbePageRequest>(request) ||
                          std::holds_alternative<protocol::DropPageRequest>(request);
  const auto* read = std::get_if<protocol::ReadPageRequest>(&request);
  if (!cache_only && (read == nullptr || read->refetch)) {
    // Loads, copies and refetches may read the source: a thread of their own.
    return mount_table()->FindByPath(protocol::BaseOf(request).page.mount).ok()
               ? Route::kMiss
               : Route::kMountUnknown;
  }
  if (cache_only) {
    if (!mount_table()->FindByPath(protocol::BaseOf(request).page.mount).ok()) {
      return Route::kMountUnknown;
    }
    *served = Serve(request);
    return Route::kServed;
  }
  StatusOr<Resolved> resolved = Resolve(read->page, /*wait=*/false);
  if (!resolved.ok()) {
    if (resolved.status().code() == StatusCode::kUnavailable) return Route::kMountUnknown;
    return Route::kMiss;  // Serve reports the error, counted as a request.
  }
  std::optional<StatusOr<PageResult>> hit = TryHit(*read, *resolved);
  if (!hit) return Route::kMiss;
  if (!hit->ok()) {
    *served = hit->status();
  } else {
    Served out;
    out.data = std::move(*hit).value();
    *served = std::move(out);
  }
  return Route::kServed;
}

std::optional<StatusOr<PageResult>> PageService::TryHit(const protocol::ReadPageRequest& request,
                                                        const Resolved& r) {
  const int64_t start = options_.clock->NowMicros();
  if (request.length == 0 || request.offset >= r.page_length) return std::nullopt;
  std::optional<PageResult> hit =
      ServeHit(r, request.offset, request.length, /*for_peer=*/false, start);
  if (!hit) return std::nullopt;  // Not cached, or another length: the miss path decides.
  metrics_->requests->Increment();
  r.metrics->requests->Increment();
  return std::move(*hit);
}

std::optional<PageResult> PageService::ServeHit(const Resolved& r, uint32_t offset, uint32_t length,
                                                bool for_peer, int64_t start) {
  auto cached = ServeFromCache(r.key, r.page_length, offset, length);
  if (!cached.ok()) return std::nullopt;
  CountHit(r.metrics, for_peer, cached->range.size());
  if (!for_peer) metrics_->hit_latency->Observe((options_.clock->NowMicros() - start) / 1e6);
  return std::move(cached).value();
}

std::optional<PageResult> PageService::ServeVerifiedHit(const Resolved& r, uint32_t offset,
                                                        uint32_t length, int64_t start) {
  auto cached = ServeFromCache(r.key, r.page_length, offset, length);
  if (!cached.ok()) return std::nullopt;
  Status check = pagestore::VerifyPage(*cached->reader);
  if (check.ok()) {
    CountHit(r.metrics, /*for_peer=*/false, cached->range.size());
    metrics_->hit_latency->Observe((options_.clock->NowMicros() - start) / 1e6);
    return std::move(cached).value();
  }
  spdlog::warn("cached page {} of {} failed its check after a client's report ({}); dropping it",
               r.key.page_index, r.key.object_id, check.message());
  Status dropped =
      store_->RemoveCopy(r.key, cached->reader->copy_id(), pagestore::RemoveReason::kCorrupt);
  // Not that copy any more: another report's refetch may have stored a new one meanwhile.
  if (dropped.code() == StatusCode::kNotFound) return ServeHit(r, offset, length, false, start);
  return std::nullopt;
}

void PageService::DropCachedPage(const PageRef& page, const pagestore::PageReader& copy) {
  std::shared_ptr<const mount::MountTable> mounts = mount_table();
  auto mount = mounts->FindByPath(page.mount);
  if (!mount.ok()) return;
  spdlog::warn("cached page {} of {} failed while being read; dropping it", page.page_index,
               (*mount)->ObjectId(page.key));
  store_
      ->RemoveCopy({(*mount)->ObjectId(page.key), page.version, page.page_index}, copy.copy_id(),
                   pagestore::RemoveReason::kCorrupt)
      .IgnoreError();
}

Status PageService::CheckPageSize(const PageRef& page) const {
  if (page.page_size == options_.page_size) return Status::Ok();
  return InvalidArgumentError("page size mismatch: client uses " + std::to_string(page.page_size) +
                              ", worker " + std::to_string(options_.page_size));
}

StatusOr<PageService::Resolved> PageService::Resolve(const PageRef& page, bool wait) {
  CAIRN_RETURN_IF_ERROR(CheckPageSize(page));
  Resolved r;
  auto mount = FindMount(page.mount, &r.table, &r.metrics, wait);
  if (!mount.ok()) return mount.status();
  r.mount = *mount;
  r.page_length = protocol::PageLengthOf(page);
  if (r.page_length == 0) return InvalidArgumentError("page past end of object");
  r.key = {r.mount->ObjectId(page.key), page.version, page.page_index};
  return r;
}

StatusOr<PageService::Served> PageService::Serve(const protocol::Request& request) {
  Served served;
  auto as_data = [&](StatusOr<PageResult> r) -> StatusOr<Served> {
    if (!r.ok()) return r.status();
    served.data = std::move(r).value();
    return std::move(served);
  };
  auto as_control = [&](StatusOr<PageSource> r) -> StatusOr<Served> {
    if (!r.ok()) return r.status();
    served.control = *r;
    return std::move(served);
  };
  struct Visitor {
    PageService* self;
    decltype(as_data)& data;
    decltype(as_control)& control;
    StatusOr<Served> operator()(const protocol::ReadPageRequest& q) {
      return data(self->ReadPage(q));
    }
    StatusOr<Served> operator()(const protocol::LookupPageRequest& q) {
      return data(self->LookupPage(q));
    }
    StatusOr<Served> operator()(const protocol::PeerReadRequest& q) {
      return data(self->PeerRead(q));
    }
    StatusOr<Served> operator()(const protocol::LoadPageRequest& q) {
      return control(self->LoadPage(q));
    }
    StatusOr<Served> operator()(const protocol::CopyFromPeerRequest& q) {
      return control(self->CopyFromPeer(q));
    }
    StatusOr<Served> operator()(const protocol::ProbePageRequest& q) {
      return control(self->ProbePage(q));
    }
    StatusOr<Served> operator()(const protocol::DropPageRequest& q) {
      return control(self->DropPage(q));
    }
  };
  return std::visit(Visitor{this, as_data, as_control}, request);
}

StatusOr<PageSource> PageService::ProbePage(const protocol::ProbePageRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(Resolved r, Resolve(request.page));
  return store_->Contains(r.key) ? PageSource::kCache : PageSource::kUnderStorage;
}

StatusOr<PageSource> PageService::DropPage(const protocol::DropPageRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(Resolved r, Resolve(request.page));
  if (!store_->Contains(r.key)) return PageSource::kUnderStorage;
  Status removed = store_->Remove(r.key, pagestore::RemoveReason::kFreed);
  if (removed.code() == StatusCode::kNotFound) return PageSource::kUnderStorage;  // Evicted.
  CAIRN_RETURN_IF_ERROR(removed);
  metrics_->freed->Increment();
  r.metrics->freed->Increment();
  return PageSource::kCache;
}

StatusOr<PageSource> PageService::LoadPage(const protocol::LoadPageRequest& request) {
  return Load(request.page, "");
}

StatusOr<PageSource> PageService::CopyFromPeer(const protocol::CopyFromPeerRequest& request) {
  return Load(request.page, request.peer);
}

StatusOr<PageSource> PageService::Load(const PageRef& page, const std::string& peer) {
  if (protocol::IsPendingVersion(page.version)) {
    return FailedPreconditionError(page.key + " is not in its source yet (write-back): " +
                                   "`cairn sync` it before loading it");
  }
  CAIRN_ASSIGN_OR_RETURN(Resolved r, Resolve(page));
  metrics_->load_requests->Increment();
  if (store_->Contains(r.key)) {
    // Opening counts as a use: a page preloaded again right before a job is fresh, not the
    // next victim.
    if (store_->Open(r.key).ok()) return PageSource::kCache;
  }
  FetchOptions fetch_options;
  fetch_options.peer = peer;
  fetch_options.peer_wait = options_.peer_timeout;
  // No read-ahead: a preload sends a load for every page itself (in parallel), and reports per
  // page what it read from the source.
  auto fetch = FetchPage(*r.mount, r.metrics, r.key, page, r.page_length, fetch_options);
  if (!fetch.ok()) return fetch.status();
  metrics_->loaded->Increment();
  // A load is done when the page is on disk: wait for the background write to finish.
  {
    MutexLock l(&(*fetch)->mu);
    (*fetch)->cv.Wait(&(*fetch)->mu, [&]() REQUIRES((*fetch)->mu) { return (*fetch)->stored; });
  }
  // The write can fail (a folder full of pinned pages, a mount over its quota, a disk error):
  // then the page is not cached and the load must say so.
  if (!store_->Contains(r.key)) {
    return ResourceExhaustedError("page " + std::to_string(page.page_index) + " of " + page.key +
                                  " was read but could not be cached on worker " +
                                  options_.worker_id +
                                  " (full of pinned pages, over quota, or "
                                  "a disk error: see its log)");
  }
  return (*fetch)->origin;
}

StatusOr<PageResult> PageService::ReadPage(const protocol::ReadPageRequest& request) {
  if (protocol::IsPendingVersion(request.page.version)) return ReadPending(request);
  return Read(request.page, request.offset, request.length, Reader::kClient, request.refetch,
              request.no_cache, request.deadline_ms);
}

StatusOr<PageResult> PageService::ReadPending(const protocol::ReadPageRequest& request) {
  metrics_->requests->Increment();
  const uint32_t page_length = protocol::PageLengthOf(request.page);
  if (page_length == 0 || request.length == 0 || request.offset >= page_length) {
    metrics_->errors->Increment();
    return InvalidArgumentError("page range past end of object");
  }
  PendingFiles* pending = pending_files_.load();
  if (pending == nullptr) {
    metrics_->errors->Increment();
    return FailedPreconditionError("worker " + options_.worker_id +
                                   " holds no files waiting for upload (" + request.page.version +
                                   " was written through another worker, or before a restart)");
  }
  StatusOr<PendingFiles::Page> page = pending->ReadPendingPage(request.page, page_length);
  if (!page.ok()) {
    metrics_->errors->Increment();
    return page.status();
  }
  if (page->bytes == nullptr) {
    if (protocol::IsPendingVersion(page->committed_version)) {
      return InternalError("a pending file was committed under a pending version");
    }
    protocol::ReadPageRequest committed = request;  // Same bytes, now in the source.
    committed.page.version = std::move(page->committed_version);
    return ReadPage(committed);
  }
  PageResult result;
  result.source = PageSource::kCache;
  result.range = protocol::AlignedRange(request.offset, request.length, page_length);
  result.checksums =
      ChunkChecksums(page->bytes->span().subspan(result.range.begin, result.range.size()));
  result.page = std::move(page->bytes);
  return result;
}

StatusOr<PageResult> PageService::LookupPage(const protocol::LookupPageRequest& request) {
  return Read(request.page, request.offset, request.length, Reader::kLookup, false, false,
              request.deadline_ms);
}

StatusOr<PageResult> PageService::PeerRead(const protocol::PeerReadRequest& request) {
  uint32_t page_length = protocol::PageLengthOf(request.page);
  if (page_length == 0) return InvalidArgumentError("page past end of object");
  return Read(request.page, 0, page_length, Reader::kPeer, false, false, request.deadline_ms);
}

std::chrono::milliseconds PageService::PeerWait(uint32_t deadline_ms) const {
  if (deadline_ms == 0) return options_.peer_timeout;
  return std::min(options_.peer_timeout, std::chrono::milliseconds(deadline_ms / 2));
}

StatusOr<PageResult> PageService::Read(const PageRef& page, uint32_t offset, uint32_t length,
                                       Reader reader, bool refetch, bool no_cache,
                                       uint32_t deadline_ms) {
  int64_t start = options_.clock->NowMicros();
  // A peer copying a page it was asked to cache is not a reader: kept out of the hit ratio.
  const bool for_peer = reader == Reader::kPeer;
  if (!for_peer) metrics_->requests->Increment();
  // Held for the whole request: the fetch below uses the mount's under-storage.
  StatusOr<Resolved> resolved = Resolve(page);
  if (!resolved.ok()) {
    // Not "no such file" for an unknown mount: in a cluster this worker may not have seen a
    // new mount yet (Unavailable: the client goes elsewhere).
    metrics_->errors->Increment();
    return resolved.status();
  }
  const Resolved& r = *resolved;
  MountMetrics* per_mount = r.metrics;
  if (!for_peer) per_mount->requests->Increment();
  if (length == 0 || offset >= r.page_length) {
    metrics_->errors->Increment();
    return InvalidArgumentError("page range past end of object");
  }

  if (refetch) {
    metrics_->checksum_failures->Increment();
    // Several reads of one damaged page each report it: only a copy that fails a check here is
    // dropped, so a later report keeps (and is served) the copy the first one fetched.
    if (std::optional<PageResult> hit = ServeVerifiedHit(r, offset, length, start)) {
      return std::move(*hit);
    }
  } else if (std::optional<PageResult> hit = ServeHit(r, offset, length, for_peer, start)) {
    // TryServeNow found no copy, but a fetch may have stored one while this request queued for
    // a miss thread.
    return std::move(*hit);
  }

  if (reader != Reader::kClient) {
    // A replica lookup or a peer fill. A page read from the source a moment ago may still be
    // on its way to disk: serve its bytes from memory (that is what a peer fill right after the
    // read needs).
    if (std::shared_ptr<Fetch> fetch = FinishedFetch({r.key.Id(), r.page_length})) {
      CAIRN_RETURN_IF_ERROR(CheckFetchedLength(*fetch, r.page_length, page));
      PageResult result;
      result.source = PageSource::kCache;
      result.range = protocol::AlignedRange(offset, length, r.page_length);
      result.checksums = ChecksumsOf(fetch->checksums, result.range);
      result.page = fetch->page;
      CountHit(per_mount, for_peer, result.range.size());
      return result;
    }
    // The fetch may have been stored and retired between the hit check above and the
    // in-flight check (a page is published before its fetch is retired, so this order cannot
    // miss both): look in the store once more before answering "not here", which would cost the
    // asker a source read (a replica copy, a read repair) it does not need.
    if (std::optional<PageResult> hit = ServeHit(r, offset, length, for_peer, start)) {
      return std::move(*hit);
    }
    // Not here: the client asks the other replicas before paying for the source.
    metrics_->cache_only_misses->Increment();
    PageResult none;
    none.source = PageSource::kUnderStorage;
    return none;  // Empty range: "not cached here".
  }
  metrics_->misses->Increment();
  per_mount->misses->Increment();
  if (!no_cache && options_.rules != nullptr &&
      options_.rules->AdmissionFor(page.mount, page.key) == policy::Admission::kBypass) {
    no_cache = true;  // A one-pass path: serve, do not keep.
    metrics_->bypassed->Increment();
  }
  FetchOptions fetch_options;
  fetch_options.no_cache = no_cache;
  fetch_options.peer_wait = PeerWait(deadline_ms);
  // A one-pass scan neither looks on the replicas nor fills them.
  if (!no_cache) fetch_options.replicas = OtherReplicas(*r.mount, r.key);
  // Replicated pages are looked up on (and copied to) their replicas one by one.
  fetch_options.read_ahead = fetch_options.replicas.empty();
  auto fetch = FetchPage(*r.mount, r.metrics, r.key, page, r.page_length, fetch_options);
  if (!fetch.ok()) {
    metrics_->errors->Increment();
    return fetch.status();
  }
  PageResult result;
  result.source = (*fetch)->origin;
  result.range = protocol::AlignedRange(offset, length, r.page_length);
  result.checksums = ChecksumsOf((*fetch)->checksums, result.range);
  result.page = (*fetch)->page;
  metrics_->miss_latency->Observe((options_.clock->NowMicros() - start) / 1e6);
  return result;
}

StatusOr<PageResult> PageService::ServeFromCache(const pagestore::PageKey& key,
                                                 uint32_t page_length, uint32_t offset,
                                                 uint32_t length) {
  auto reader = store_->Open(key);
  if (!reader.ok()) return reader.status();
  if ((*reader)->data_length() != page_length) {
    // Same key, different length: the request names another object size than the one the
    // page was read with. Never serve it; the miss path asks the source which one is right
    // (and replaces the page if the request is). Not dropped here: a peer naming a wrong size
    // must not be able to empty the cache.
    return FailedPreconditionError("cached page length does not match the object size");
  }
  PageResult result;
  result.source = PageSource::kCache;
  result.range = protocol::AlignedRange(offset, length, page_length);
  result.checksums = ChecksumsOf((*reader)->chunk_checksums(), result.range);
  result.reader = std::move(reader).value();
  return result;
}

StatusOr<std::shared_ptr<PageService::Fetch>> PageService::FetchPage(
    const mount::Mount& mount, MountMetrics* per_mount, const pagestore::PageKey& key,
    const PageRef& page, uint32_t page_length, const FetchOptions& options) {
  const FetchKey id{key.Id(), page_length};
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
    {
      MutexLock l(&fetch->mu);
      fetch->cv.Wait(&fetch->mu, [&]() REQUIRES(fetch->mu) { return fetch->done; });
      if (!fetch->status.ok()) return fetch->status;
    }
    // The leader's request may have named another object size than ours: the bytes that exist
    // are the leader's page, checked against the source, and a range outside them is refused.
    CAIRN_RETURN_IF_ERROR(CheckFetchedLength(*fetch, page_length, page));
    return fetch;
  }

  // This request missed the store before it registered; a fetch of the same page may have
  // stored it and retired in between (a page is published before its fetch is retired): one
  // lookup here (a miss costs a source read) instead of a second source read of the page.
  if (TakeStoredCopy(key, page_length, fetch.get())) {
    metrics_->coalesced->Increment();
    Finish(fetch.get(), Status::Ok());
    StoreOrRetire(key, id, fetch, /*store=*/false);
    return fetch;
  }
  Status status;
  PeerAnswers peers;
  if (!options.peer.empty() && options_.peers != nullptr && options_.peer_fill) {
    peers = ReadFromPeers(page, {options.peer}, page_length, options.peer_wait);
    peers.lacking.clear();  // A copy is a replica's own business: it tells no one else.
    if (peers.page == nullptr) {
      metrics_->peer_fill_failures->Increment();
      spdlog::debug("peer fill of page {} of {} from {} failed ({}); reading the source",
                    page.page_index, page.key, options.peer, peers.last_error.ToString());
    }
  } else if (!options.replicas.empty() && !options_.peer_fill) {
    peers.lacking = options.replicas;  // Each asks its own cache, then the source.
  } else if (!options.replicas.empty()) {
    metrics_->replica_lookups->Increment();
    peers = ReadFromPeers(page, options.replicas, page_length, options.peer_wait);
    if (!peers.last_error.ok()) {
      metrics_->replica_lookup_failures->Increment();
      spdlog::debug("replica lookup of page {} of {}: {}", page.page_index, page.key,
                    peers.last_error.ToString());
    }
  }
  std::vector<RunPage> run;
  if (peers.page != nullptr) {
    metrics_->peer_fills->Increment();
    metrics_->bytes_from_peers->Increment(page_length);
    fetch->page = std::move(peers.page);
    fetch->checksums = std::move(peers.checksums);
    fetch->origin = PageSource::kPeer;
  } else {
    if (options.read_ahead && !options.no_cache) run = ClaimFollowingPages(key, page);
    status = ReadRunFromSource(mount, per_mount, page, page_length, fetch.get(), run);
  }
  if (!status.ok()) {
    metrics_->ufs_errors->Increment();
    spdlog::warn("UFS read of {} page {}{} failed: {}", mount.ObjectId(page.key), page.page_index,
                 run.empty() ? "" : " and the " + std::to_string(run.size()) + " after it",
                 status.ToString());
  }
  if (size_t failed = std::count_if(run.begin(), run.end(),
                                    [](const RunPage& next) { return !next.status.ok(); });
      status.ok() && failed > 0) {
    spdlog::warn("UFS read of {} after page {}: {} of {} pages read ahead are not there ({})",
                 mount.ObjectId(page.key), page.page_index, failed, run.size(),
                 run.back().status.ToString());
  }
  Finish(fetch.get(), status);
  for (RunPage& next : run) {
    next.fetch->origin = PageSource::kUnderStorage;
    Finish(next.fetch.get(), next.status);
  }
  // The bytes are in memory now (served to peers from there until they are on disk): the
  // replicas that lack the page can copy it from here.
  if (status.ok() && !options.no_cache) CopyToReplicas(page, peers.lacking);
  for (RunPage& next : run) {
    const bool ok = next.status.ok();
    StoreOrRetire(next.key, next.id, std::move(next.fetch), ok);
  }
  StoreOrRetire(key, id, fetch, status.ok() && !options.no_cache);
  if (!status.ok()) return status;
  return fetch;
}

bool PageService::TakeStoredCopy(const pagestore::PageKey& key, uint32_t page_length,
                                 Fetch* fetch) {
  auto reader = store_->Open(key);
  if (!reader.ok() || (*reader)->data_length() != page_length) return false;
  auto bytes = std::make_shared<PageBytes>(page_length);
  if (!(*reader)->ReadAt(0, bytes->span()).ok()) return false;
  std::vector<uint64_t> checksums = ChunkChecksums(bytes->span());
  if (checksums != (*reader)->chunk_checksums()) {
    spdlog::warn("cached page {} of {} failed its check; dropping it", key.page_index,
                 key.object_id);
    store_->RemoveCopy(key, (*reader)->copy_id(), pagestore::RemoveReason::kCorrupt).IgnoreError();
    return false;
  }
  fetch->page = std::move(bytes);
  fetch->checksums = std::move(checksums);
  fetch->origin = PageSource::kCache;
  return true;
}

void PageService::Finish(Fetch* fetch, const Status& status) {
  {
    MutexLock l(&fetch->mu);
    fetch->done = true;
    fetch->status = status;
  }
  fetch->cv.NotifyAll();
}

void PageService::StoreOrRetire(const pagestore::PageKey& key, const FetchKey& id,
                                std::shared_ptr<Fetch> fetch, bool store) {
  if (!store) {
    Retire(id);
  } else if (pending_stores_.fetch_add(1) < options_.max_pending_stores) {
    store_pool_->Submit([this, key, id, fetch = std::move(fetch)] {
      StoreAndRetire(key, id, fetch);
      pending_stores_.fetch_sub(1);
    });
  } else {
    StoreAndRetire(key, id, fetch);  // Writers are behind: push back on this reader instead.
    pending_stores_.fetch_sub(1);
  }
}

bool PageService::Owns(const pagestore::PageKey& key) const {
  if (options_.peers == nullptr) return true;
  uint64_t h = placement::PageKeyHash(key.object_id, key.version, key.page_index);
  std::vector<std::string> owner = options_.peers->Replicas(h, 1);
  return !owner.empty() && owner.front() == options_.worker_id;
}

std::vector<PageService::RunPage> PageService::ClaimFollowingPages(const pagestore::PageKey& key,
                                                                   const PageRef& page) {
  std::vector<RunPage> run;
  const uint64_t max_pages = options_.source_read_bytes / page.page_size;
  if (max_pages < 2 || page.page_index == 0) return run;
  // No overflow: the request's page exists, so page_index < pages <= object_size.
  const uint64_t pages =
      page.object_size / page.page_size + (page.object_size % page.page_size != 0);
  const pagestore::PageKey before{key.object_id, key.version, key.page_index - 1};
  const bool before_cached = store_->Contains(before);
  for (uint64_t q = page.page_index + 1; q < pages && run.size() + 1 < max_pages; ++q) {
    RunPage next;
    next.key = {key.object_id, key.version, q};
    if (!Owns(next.key) || store_->Contains(next.key)) break;
    PageRef ref = page;
    ref.page_index = q;
    next.length = protocol::PageLengthOf(ref);
    next.id = {next.key.Id(), next.length};
    run.push_back(std::move(next));
  }
  if (run.empty()) return run;
  MutexLock l(&mu_);
  // Sequential: the page before is cached or being read (pages before the last are whole).
  if (!before_cached && !in_flight_.contains({before.Id(), page.page_size})) return {};
  // Each page is asked of the store again here: a fetch of it may have stored it and retired
  // since the look above (a fetch stores before it retires, and none starts while mu_ is
  // held), and would be read from the source twice.
  size_t claimed = 0;
  for (; claimed < run.size() && !in_flight_.contains(run[claimed].id) &&
         !store_->Contains(run[claimed].key);
       ++claimed) {
    run[claimed].fetch = std::make_shared<Fetch>();
    in_flight_.emplace(run[claimed].id, run[claimed].fetch);
  }
  run.resize(claimed);
  return run;
}

Status PageService::ReadRunFromSource(const mount::Mount& mount, MountMetrics* per_mount,
                                      const PageRef& page, uint32_t page_length, Fetch* fetch,
                                      std::vector<RunPage>& run) {
  // The object size comes from the peer. A short (last) page is read with one byte more, so
  // the source itself confirms that the object ends where the request says: the pages stored
  // and shared with joiners always hold exactly the bytes that exist.
  uint64_t total = page_length;
  for (const RunPage& next : run) total += next.length;
  const uint32_t last_length = run.empty() ? page_length : run.back().length;
  const uint32_t probe = last_length < page.page_size ? 1 : 0;
  // Bounded: page_length <= page_size and the run holds at most source_read_bytes.
  const auto capacity = static_cast<uint32_t>(total + probe);
  // A lone page is read into its own buffer; a run into one buffer cut into exact pages after.
  auto bytes = std::make_shared<PageBytes>(run.empty() ? page_length : capacity, capacity);
  metrics_->ufs_requests->Increment();
  per_mount->ufs_requests->Increment();
  // No overflow: PageLength returned non-zero, so page_index * page_size < object_size.
  uint64_t offset = page.page_index * page.page_size;
  auto n =
      mount.ufs->Read(page.key, page.version, offset, std::span<char>(bytes->data.get(), capacity));
  if (!n.ok()) {
    for (RunPage& next : run) next.status = n.status();
    return n.status();
  }
  // Each page on its own: one whose bytes were all read is right whatever the rest of the run
  // (the request's object size may be wrong, or a lie: a joiner waiting for a page that exists
  // must not fail for it). A short page must end exactly where the read did.
  const uint64_t got = *n;
  auto confirm = [&](uint64_t at, uint32_t length) -> Status {
    if (at + length > got) {
      return FailedPreconditionError("object " + page.key + " is shorter than its size at open");
    }
    if (length < page.page_size && got > at + length) {
      return FailedPreconditionError("object " + page.key + " is longer than the size " +
                                     std::to_string(page.object_size) + " the request named");
    }
    metrics_->bytes_from_ufs->Increment(length);
    per_mount->bytes_from_ufs->Increment(length);
    return Status::Ok();
  };
  auto cut = [&bytes](uint64_t at, uint32_t length) {
    auto page_bytes = std::make_shared<PageBytes>(length);
    std::memcpy(page_bytes->data.get(), bytes->data.get() + at, length);
    return page_bytes;
  };
  uint64_t at = page_length;
  for (RunPage& next : run) {
    next.status = confirm(at, next.length);
    if (next.status.ok()) {
      metrics_->read_ahead_pages->Increment();
      std::shared_ptr<PageBytes> copy = cut(at, next.length);
      next.fetch->checksums = ChunkChecksums(copy->span());
      next.fetch->page = std::move(copy);
    }
    at += next.length;
  }
  CAIRN_RETURN_IF_ERROR(confirm(0, page_length));
  // Not the run's buffer: a fetch holds only its own page.
  if (!run.empty()) bytes = cut(0, page_length);
  fetch->checksums = ChunkChecksums(bytes->span());
  fetch->page = std::move(bytes);
  return Status::Ok();
}

std::vector<std::string> PageService::ReplicasOf(const mount::Mount& mount,
                                                 const pagestore::PageKey& key) const {
  if (options_.peers == nullptr) return {options_.worker_id};
  uint64_t h = placement::PageKeyHash(key.object_id, key.version, key.page_index);
  return options_.peers->Replicas(h, static_cast<size_t>(std::max(1, mount.spec.replicas)));
}

std::vector<std::string> PageService::OtherReplicas(const mount::Mount& mount,
                                                    const pagestore::PageKey& key) const {
  std::vector<std::string> others;
  if (options_.peers == nullptr || mount.spec.replicas <= 1) return others;
  uint64_t h = placement::PageKeyHash(key.object_id, key.version, key.page_index);
  for (std::string& id : options_.peers->Replicas(h, mount.spec.replicas)) {
    if (id != options_.worker_id) others.push_back(std::move(id));
  }
  return others;
}

PageService::PeerAnswers PageService::ReadFromPeers(const PageRef& page,
                                                    const std::vector<std::string>& ids,
                                                    uint32_t page_length,
                                                    std::chrono::milliseconds wait) {
  // Shared with the callbacks, which may run after this call has given up on a late peer: the
  // buffers must stay alive until each channel is done with its own.
  struct Round {
    Mutex mu;
    CondVar cv;
    std::vector<std::shared_ptr<PageBytes>> buffers;  // One per peer; fixed before the calls.
    std::vector<std::optional<StatusOr<protocol::PageReply>>> replies GUARDED_BY(mu);
  };
  auto round = std::make_shared<Round>();
  std::vector<std::shared_ptr<protocol::PageChannel>> channels;
  PeerAnswers answers;
  for (const std::string& id : ids) {
    std::shared_ptr<protocol::PageChannel> channel = options_.peers->Get(id);
    if (channel == nullptr) {
      answers.last_error = NotFoundError("no peer " + id);
      continue;
    }
    channels.push_back(std::move(channel));
    round->buffers.push_back(std::make_shared<PageBytes>(page_length));
  }
  const size_t n = channels.size();
  {
    MutexLock l(&round->mu);
    round->replies.resize(n);
  }
  // Fills do not chain: a peer serves what it has, or nothing.
  protocol::PeerReadRequest ask;
  ask.page = page;
  ask.deadline_ms = static_cast<uint32_t>(std::max<int64_t>(wait.count(), 1));
  for (size_t i = 0; i < n; ++i) {
    channels[i]->Call(ask, round->buffers[i]->span(),
                      [round, i](StatusOr<protocol::PageReply> reply) {
                        {
                          MutexLock l(&round->mu);
                          round->replies[i] = std::move(reply);
                        }
                        round->cv.NotifyAll();
                      });
  }
  // Examines the answers as they come; the first intact copy wins.
  std::vector<bool> seen(n, false);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  MutexLock l(&round->mu);
  for (size_t examined = 0; examined < n;) {
    auto arrived = [&]() REQUIRES(round->mu) {
      for (size_t i = 0; i < n; ++i) {
        if (!seen[i] && round->replies[i].has_value()) return true;
      }
      return false;
    };
    auto left = deadline - std::chrono::steady_clock::now();
    if (!round->cv.WaitFor(&round->mu, std::max(left, decltype(left)::zero()), arrived)) {
      answers.last_error = DeadlineExceededError("no answer in time");
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      if (seen[i] || !round->replies[i].has_value()) continue;
      seen[i] = true;
      ++examined;
      const StatusOr<protocol::PageReply>& reply = *round->replies[i];
      if (!reply.ok()) {
        answers.last_error = reply.status();
      } else if (reply->source != PageSource::kCache || reply->data_length == 0) {
        answers.lacking.push_back(ids[i]);
      } else if (reply->data_offset != 0 || reply->data_length != page_length ||
                 ChunkChecksums(round->buffers[i]->span()) != reply->checksums) {
        answers.last_error = CorruptionError("the peer's bytes do not match its checksums");
      } else {
        // Its callback has run: the channel no longer writes to this buffer.
        answers.page = round->buffers[i];
        answers.checksums = reply->checksums;
        return answers;
      }
    }
  }
  return answers;
}

void PageService::CopyToReplicas(const PageRef& page, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    std::shared_ptr<protocol::PageChannel> channel = options_.peers->Get(id);
    if (channel == nullptr) continue;
    if (replica_copies_->fetch_add(1) >= options_.max_replica_copies) {
      replica_copies_->fetch_sub(1);
      metrics_->replica_copies_skipped->Increment();
      continue;
    }
    metrics_->replica_copies->Increment();
    protocol::CopyFromPeerRequest copy;
    copy.page = page;
    copy.peer = options_.worker_id;
    // A copy waits behind the replica's other misses and its disk write.
    copy.deadline_ms = 120'000;
    replica_pool_->Submit([channel = std::move(channel), copy, counter = replica_copies_] {
      channel->Call(copy, {}, [counter, id = copy.page.key](StatusOr<protocol::PageReply> reply) {
        counter->fetch_sub(1);
        if (!reply.ok())
          spdlog::debug("replica copy of {} failed: {}", id, reply.status().ToString());
      });
    });
  }
}

Status PageService::CheckFetchedLength(const Fetch& fetch, uint32_t page_length,
                                       const PageRef& page) {
  if (fetch.page->size == page_length) return Status::Ok();
  metrics_->errors->Increment();
  return FailedPreconditionError("page " + std::to_string(page.page_index) + " of " + page.key +
                                 " holds " + std::to_string(fetch.page->size) + " bytes, not the " +
                                 std::to_string(page_length) + " that an object of " +
                                 std::to_string(page.object_size) + " bytes would have");
}

void PageService::CountHit(MountMetrics* per_mount, bool for_peer, uint64_t bytes) {
  if (for_peer) {
    metrics_->peer_serves->Increment();
    metrics_->bytes_to_peers->Increment(bytes);
    return;
  }
  metrics_->hits->Increment();
  metrics_->bytes_from_cache->Increment(bytes);
  per_mount->hits->Increment();
  per_mount->bytes_from_cache->Increment(bytes);
}

std::shared_ptr<PageService::Fetch> PageService::FinishedFetch(const FetchKey& id) {
  std::shared_ptr<Fetch> fetch;
  {
    MutexLock l(&mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return nullptr;
    fetch = it->second;
  }
  MutexLock l(&fetch->mu);
  if (!fetch->done || !fetch->status.ok() || fetch->page == nullptr) return nullptr;
  return fetch;
}

size_t PageService::FetchesInFlight() {
  MutexLock l(&mu_);
  return in_flight_.size();
}

void PageService::StoreAndRetire(const pagestore::PageKey& key, const FetchKey& id,
                                 std::shared_ptr<Fetch> fetch) {
  Status s = store_->PutWithChecksums(key, fetch->page->span(), fetch->checksums);
  if (!s.ok()) {
    metrics_->store_failures->Increment();
    spdlog::warn("caching page {} of {} failed: {}", key.page_index, key.object_id, s.ToString());
  }
  Retire(id);
}

void PageService::Retire(const FetchKey& id) {
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
