// PageService: the worker's read path, independent of the transport.
//
// ReadPage serves the chunk-aligned range of one page: from the page store when cached (a hit),
// else from the under-storage (a miss), which is then stored. Concurrent misses on one page
// coalesce into a single UFS fetch, and requests arriving while that page is being written to
// disk are served from the fetched bytes. The checksums returned are the stored ones for hits
// (the client verifies them: end-to-end), fresh ones for misses.
//
// Replication is the workers' job (a mount with replicas = R > 1, in a cluster: options.peers).
// A client sends a read to one of the page's R replicas (the first R workers the ring names for
// it). On a miss, that worker looks for the page on the other replicas (PeerRead, cache only,
// all at once), else reads the source; as soon as it has the bytes (before its reply is sent) it
// tells each replica that answered "not cached" to copy the page from it (CopyFromPeer, in the
// background), and answers. So a cold page costs one source read and one client round trip
// whatever R, and a replica set changed by a lost or new worker gets back to R copies on the
// next read of each page through a replica that lacks it (read repair).
//
// Thread-safety: all methods are thread-safe.
#ifndef CAIRN_WORKER_PAGE_SERVICE_H_
#define CAIRN_WORKER_PAGE_SERVICE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/checksum.h"
#include "common/clock.h"
#include "common/thread_annotations.h"
#include "common/thread_pool.h"
#include "metrics/registry.h"
#include "mount/mount_table.h"
#include "pagestore/page_store.h"
#include "worker/page_rules.h"
#include "worker/peer_set.h"
#include "protocol/wire.h"

namespace cairn::worker {

struct MountMetrics;  // Per-mount counters (page_service.cc).

struct PageServiceOptions {
  uint32_t page_size = 1 << 20;
  std::string worker_id = "worker";
  // Advertised in the Hello reply for short-circuit reads (see docs/protocol.md).
  std::string instance_token;
  std::vector<std::string> cache_dirs;
  int store_threads = 2;           // Background page writers.
  size_t max_pending_stores = 64;  // Pages queued for writing before misses write inline.
  Clock* clock = Clock::Real();
  // Cluster rules (admission: a bypassed path is served without being cached). Not owned; may
  // be null (no rules).
  const PageRules* rules = nullptr;
  // How long a request naming an unknown mount waits for the mount table to change before
  // failing with Unavailable (cluster mode: the table follows etcd). 0 = fail at once.
  std::chrono::milliseconds unknown_mount_wait{0};
  // The other workers (the ring and a channel to each): replica lookups on a miss, CopyFromPeer
  // (copy the page from the named peer instead of reading the source) and replica copies. Not
  // owned; may be null (no replication: a miss reads the source).
  const PeerSet* peers = nullptr;
  // Copy pages from peers (replica lookups, CopyFromPeer). False (`cairn worker
  // --no-peer-fill`): misses and copies read the source, so each replica pays its own source
  // read; the other replicas are still told to cache a page this worker fetched.
  bool peer_fill = true;
  // How long a peer fill or a replica lookup waits for the peers before reading the source. A
  // client's read with a deadline waits at most half of it (the source read gets the other
  // half): a frozen replica must not make every worker the client fails over to miss the
  // client's deadline too.
  std::chrono::milliseconds peer_timeout{2000};
  // Replica copies (CopyFromPeer sent to the other replicas after a miss) in flight at most;
  // beyond it a copy is skipped (counted), and that replica fills on a later read.
  size_t max_replica_copies = 256;
  // A miss of a sequential reader (the page before it is cached or being fetched) reads the
  // pages after it that this worker owns and lacks in the same source request, up to this many
  // bytes in all: one 4 MiB GET instead of four 1 MiB ones (per-request cost dominates object
  // stores; docs/benchmarks.md). At most one page size (or 0): one page per source request.
  uint32_t source_read_bytes = 4 << 20;
};

// The bytes of one fetched page. Allocated without zero-filling: every byte is overwritten by
// the under-storage read before anyone sees it.
struct PageBytes {
  explicit PageBytes(uint32_t n) : data(new char[n]), size(n) {}
  // `capacity` >= n bytes allocated, `size` = n (a read may probe one byte past the page).
  PageBytes(uint32_t n, uint32_t capacity) : data(new char[capacity]), size(n) {}
  std::unique_ptr<char[]> data;
  uint32_t size;
  std::span<char> span() { return {data.get(), size}; }
  std::span<const char> span() const { return {data.get(), size}; }
};

// The bytes of a served range. Exactly one of `reader` (a cached page: the data sits in its
// file at reader->data_file_offset() + range.begin) and `page` (fetched bytes of the whole
// page: the data is page->span().subspan(range.begin, range.size())) is set.
struct PageResult {
  protocol::PageSource source = protocol::PageSource::kCache;
  protocol::ByteRange range;
  std::vector<uint64_t> checksums;  // One per chunk of `range`.
  std::unique_ptr<pagestore::PageReader> reader;
  std::shared_ptr<const PageBytes> page;

  // Copies the range's bytes into dest (dest.size() == range.size()). IoError if the page file
  // was truncated under us.
  Status CopyTo(std::span<char> dest) const;
  // CopyTo for a caller that keeps the bytes itself (the in-process client's page buffer): a
  // large range of a cached page is read around the OS page cache (PageReader::ReadDirectAt).
  Status CopyToBypassingPageCache(std::span<char> dest) const;

 private:
  Status Copy(std::span<char> dest, bool direct) const;
};

// The files this worker holds that are closed on write-back mounts and not yet in their
// sources (docs/write-path.md, decision 7). The write service implements it; the page service
// serves pages of their pending versions from it (only this worker can), and the metadata
// service shows them over the sources' stats and listings.
// Thread-safety: implementations are thread-safe.
class PendingFiles {
 public:
  virtual ~PendingFiles() = default;
  struct Entry {
    std::string path;  // Namespace path.
    uint64_t size = 0;
    std::string version;   // A protocol::PendingVersion.
    int64_t mtime_ns = 0;  // When it was closed (wall clock).
  };
  // The newest pending file of `path` (a namespace path); nullopt if none.
  virtual std::optional<Entry> PendingStat(const std::string& path) = 0;
  // The newest pending file of each path under `dir` (at any depth), by path.
  virtual std::vector<Entry> PendingUnder(const std::string& dir) = 0;
  // The `page_length` bytes of the page `page` names (mount, key, pending version). If the
  // file is no longer pending because its upload committed it lately: `committed_version`
  // instead (the caller serves that version: same bytes). FailedPrecondition when the version
  // is not one of this worker's pending files (removed, set aside, from before a restart, or
  // written through another worker), or its size is not the request's: the reader's version is
  // gone, as when an object changes.
  struct Page {
    std::shared_ptr<PageBytes> bytes;
    std::string committed_version;
  };
  virtual StatusOr<Page> ReadPendingPage(const protocol::PageRef& page, uint32_t page_length) = 0;
};

struct ServiceStats {
  uint64_t requests = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_from_cache = 0;
  uint64_t bytes_from_ufs = 0;
  uint64_t ufs_requests = 0;
  uint64_t checksum_failures = 0;
  uint64_t peer_fills = 0;              // Pages copied from a peer worker instead of the source.
  uint64_t peer_fill_failures = 0;      // PEER hints that ended in a source read.
  uint64_t peer_serves = 0;             // Cached pages sent to peers filling their copy.
  uint64_t replica_lookups = 0;         // Misses that looked for the page on the other replicas.
  uint64_t replica_copies = 0;          // CopyFromPeer requests sent to replicas without the page.
  uint64_t replica_copies_skipped = 0;  // Not sent: max_replica_copies were in flight.
  uint64_t coalesced = 0;               // Misses that joined a fetch (or found it stored).
  uint64_t read_ahead_pages = 0;        // Pages read in the source request of an earlier page.
};

class PageService {
 public:
  // `store` and `registry` are not owned and must outlive the service.
  PageService(std::shared_ptr<const mount::MountTable> mounts, pagestore::PageStore* store,
              metrics::Registry* registry, PageServiceOptions options);
  ~PageService();

  // Errors of every request: InvalidArgument (bad request: page size mismatch, range),
  // Unavailable (no such mount here: this worker has not seen the mount yet, the client should
  // go elsewhere), NotFound (no such object), FailedPrecondition (the object no longer has the
  // requested version, or is not the size the request names), Unavailable (UFS unreachable),
  // Internal.

  // The chunks of the page holding the range: from the cache (a hit), else from the source (a
  // miss, then cached unless no_cache or a bypass admission rule).
  StatusOr<PageResult> ReadPage(const protocol::ReadPageRequest& request);
  // As ReadPage from the cache only; a result with an empty range means "not cached here".
  StatusOr<PageResult> LookupPage(const protocol::LookupPageRequest& request);
  // The whole page for a peer filling its copy (cache only; not counted as a hit).
  StatusOr<PageResult> PeerRead(const protocol::PeerReadRequest& request);

  // Control requests. Each returns kCache if the page was cached when the request arrived, else
  // kUnderStorage, or (CopyFromPeer) kPeer if the page was copied from the peer. Load and
  // CopyFromPeer fetch and store a missing page, waiting until it is written (so a finished
  // preload is really cached): ResourceExhausted if it could not be cached. Drop removes it.
  StatusOr<protocol::PageSource> LoadPage(const protocol::LoadPageRequest& request);
  StatusOr<protocol::PageSource> CopyFromPeer(const protocol::CopyFromPeerRequest& request);
  StatusOr<protocol::PageSource> ProbePage(const protocol::ProbePageRequest& request);
  StatusOr<protocol::PageSource> DropPage(const protocol::DropPageRequest& request);

  // Any request, dispatched to the calls above: `data` for the data requests, `control` for the
  // others. One place maps message types to operations, for the server and the local channel.
  struct Served {
    PageResult data;
    std::optional<protocol::PageSource> control;
  };
  StatusOr<Served> Serve(const protocol::Request& request);

  // Serves `request` at once if that needs neither a source read nor a wait: a ReadPage hit,
  // or a request that never reads the source (LookupPage, PeerRead, ProbePage, DropPage) on a
  // mount this worker knows. A hit resolves its mount once and opens its page once. kServed:
  // `*served` holds the answer (maybe an error). kMiss: run Serve on a miss thread. kMountUnknown:
  // run Serve on a thread that may wait for the mount table (options.unknown_mount_wait). The TCP
  // server serves kServed inline; a replica lookup must never wait behind misses (the miss that
  // sent it may hold a miss thread on the other worker).
  enum class Route { kServed, kMiss, kMountUnknown };
  Route TryServeNow(const protocol::Request& request, StatusOr<Served>* served)
      EXCLUDES(mounts_mu_);

  // Drops `copy` (the reader a reply was served from) after its file failed mid-read (truncated
  // under us), so the next request refetches the page; a copy that replaced it meanwhile is
  // kept. Counted as a corrupt page.
  void DropCachedPage(const protocol::PageRef& page, const pagestore::PageReader& copy);

  ServiceStats Stats() const;

  // Pages being fetched from the source or written to the store right now. A request for one of
  // them joins the fetch in flight (and gets its bytes) instead of reading the store.
  size_t FetchesInFlight() EXCLUDES(mu_);

  // Replaces the mount table (cluster mode: the etcd mount table changed). Requests in flight
  // finish with the table they started with.
  void SetMountTable(std::shared_ptr<const mount::MountTable> mounts) EXCLUDES(mounts_mu_);
  std::shared_ptr<const mount::MountTable> mount_table() const EXCLUDES(mounts_mu_);

  // A namespace path resolved against this worker's mount table (metadata requests).
  struct PathAt {
    std::shared_ptr<const mount::MountTable> table;  // Keeps resolved.mount alive.
    mount::Resolved resolved;  // mount null: a virtual directory above the mounts.
  };
  // Resolves `path` (normalised), waiting up to options.unknown_mount_wait when `wait` for a
  // table that has it (a client may know a new mount a moment before this worker does).
  // Unavailable if this worker's table has no mount at or above the path.
  StatusOr<PathAt> ResolvePath(const std::string& path, bool wait) EXCLUDES(mounts_mu_);

  // The workers that keep `key` of `mount` (its first max(1, replicas) workers on the ring, in
  // the order clients prefer them; this worker alone without peers). Empty if the ring is empty.
  std::vector<std::string> ReplicasOf(const mount::Mount& mount,
                                      const pagestore::PageKey& key) const;

  // Where pages of pending versions come from (null: none here; such reads are answered
  // FailedPrecondition). Not owned: the setter clears it before it goes.
  void SetPendingFiles(PendingFiles* files) { pending_files_.store(files); }
  PendingFiles* pending_files() const { return pending_files_.load(); }

  uint32_t page_size() const { return options_.page_size; }
  const std::string& worker_id() const { return options_.worker_id; }
  const PageServiceOptions& options() const { return options_; }
  metrics::Registry* registry() const { return registry_; }  // May be null.
  pagestore::PageStore* store() { return store_; }

 private:
  struct Fetch;
  struct Metrics;
  struct FetchKey {
    Hash128 id;
    uint32_t length = 0;
    bool operator==(const FetchKey&) const = default;
  };
  struct FetchKeyHasher {
    size_t operator()(const FetchKey& k) const { return Hash128Hasher()(k.id) ^ k.length; }
  };

  // ReadPage of a pending version: from pending_files_ (this worker holds the file), or the
  // version its upload committed.
  StatusOr<PageResult> ReadPending(const protocol::ReadPageRequest& request);

  enum class Reader { kClient, kLookup, kPeer };
  struct FetchOptions {
    bool no_cache = false;
    std::string peer;  // Non-empty: copy the page from this worker before trying the source.
    // Non-empty: look for the page on these replicas before the source, and have those that
    // lack it copy it from this worker afterwards.
    std::vector<std::string> replicas;
    // How long to wait for the peers or replicas above (options_.peer_timeout or less).
    std::chrono::milliseconds peer_wait{0};
    // May read the following pages in the same source request (options_.source_read_bytes).
    bool read_ahead = false;
  };
  // A page read from the source together with another page's miss, registered in in_flight_
  // by the miss that reads it.
  struct RunPage {
    pagestore::PageKey key;
    FetchKey id;
    uint32_t length = 0;
    std::shared_ptr<Fetch> fetch;
    Status status;  // Of its part of the source read.
  };
  // A request's page, resolved against this worker: its mount (kept alive by `table`), length
  // and store key.
  struct Resolved {
    std::shared_ptr<const mount::MountTable> table;
    const mount::Mount* mount = nullptr;
    MountMetrics* metrics = nullptr;  // The mount's series, bound when the table was set.
    uint32_t page_length = 0;
    pagestore::PageKey key;
  };
  Status CheckPageSize(const protocol::PageRef& page) const;
  // `wait`: an unknown mount may wait for the table (options.unknown_mount_wait); else it is
  // Unavailable at once.
  StatusOr<Resolved> Resolve(const protocol::PageRef& page, bool wait = true);
  // A ReadPage from the cache only, counted as a hit; nullopt (nothing counted) if not cached.
  std::optional<StatusOr<PageResult>> TryHit(const protocol::ReadPageRequest& request,
                                             const Resolved& r);
  // Serves [offset, offset+length) of a cached copy of r's page and counts it as a hit (the
  // hit latency from `start` unless for a peer); nullopt (nothing counted) if there is no copy
  // of r's length.
  std::optional<PageResult> ServeHit(const Resolved& r, uint32_t offset, uint32_t length,
                                     bool for_peer, int64_t start);
  // A client found the bytes of this page damaged (ReadPage refetch). Serves the cached copy if
  // it passes a check of every chunk now: the damage was on the way, or another report's
  // refetch replaced the copy already. Drops the copy if it fails (only that copy: see
  // PageStore::RemoveCopy) and returns nullopt, as when nothing is cached: the caller fetches
  // (joining a refetch in flight). If that copy was gone already, serves whatever copy replaced
  // it (another report's refetch).
  std::optional<PageResult> ServeVerifiedHit(const Resolved& r, uint32_t offset, uint32_t length,
                                             int64_t start);
  // `deadline_ms`: the request's relative deadline (0: none), which bounds a replica lookup.
  StatusOr<PageResult> Read(const protocol::PageRef& page, uint32_t offset, uint32_t length,
                            Reader reader, bool refetch, bool no_cache, uint32_t deadline_ms);
  // How long a lookup on the peers may wait for a request with `deadline_ms` (0: none).
  std::chrono::milliseconds PeerWait(uint32_t deadline_ms) const;
  StatusOr<protocol::PageSource> Load(const protocol::PageRef& page, const std::string& peer);
  StatusOr<PageResult> ServeFromCache(const pagestore::PageKey& key, uint32_t page_length,
                                      uint32_t offset, uint32_t length);
  StatusOr<std::shared_ptr<Fetch>> FetchPage(const mount::Mount& mount, MountMetrics* per_mount,
                                             const pagestore::PageKey& key,
                                             const protocol::PageRef& page, uint32_t page_length,
                                             const FetchOptions& options);
  // The pages after `page` that its source read may read too (see
  // PageServiceOptions::source_read_bytes), each registered in in_flight_ (the caller must
  // finish and retire every one); empty if the reader does not look sequential. Stops at the
  // first page that is cached, in flight, owned by another worker or past the object's end.
  std::vector<RunPage> ClaimFollowingPages(const pagestore::PageKey& key,
                                           const protocol::PageRef& page) EXCLUDES(mu_);
  // Whether this worker is the first replica of `key` (always, without peers).
  bool Owns(const pagestore::PageKey& key) const;
  // Reads `page` and the `run` after it from the source in one request into `fetch` and each
  // run page's fetch (page and checksums; not yet marked done). Returns the status of `page`
  // and sets each run page's: a page whose bytes were all read is OK even if a later one is
  // missing (the request's object size was wrong); a failed request fails every page.
  Status ReadRunFromSource(const mount::Mount& mount, MountMetrics* per_mount,
                           const protocol::PageRef& page, uint32_t page_length, Fetch* fetch,
                           std::vector<RunPage>& run);
  // For a fetch just registered: takes the page from the store into `fetch` (whole, each chunk
  // checked; origin kCache) if another fetch stored it after this request looked for it there
  // and retired before this one registered. False if it is not stored, has another length or
  // cannot be read; a copy that fails its check is dropped (false). The caller then reads the
  // source, as it would have.
  bool TakeStoredCopy(const pagestore::PageKey& key, uint32_t page_length, Fetch* fetch);
  // Marks `fetch` done with `status` and wakes its joiners.
  static void Finish(Fetch* fetch, const Status& status);
  // Stores a fetched page in the background (inline when the writers are behind) and retires
  // its fetch; only retires it when `no_cache` or the fetch failed.
  void StoreOrRetire(const pagestore::PageKey& key, const FetchKey& id,
                     std::shared_ptr<Fetch> fetch, bool store);
  // The page's replicas other than this worker (empty unless its mount has replicas > 1 and
  // the worker knows its peers).
  std::vector<std::string> OtherReplicas(const mount::Mount& mount,
                                         const pagestore::PageKey& key) const;
  // The peers' answers to one page's PeerRead requests.
  struct PeerAnswers {
    std::shared_ptr<PageBytes> page;   // Null if no peer sent it (in time, intact).
    std::vector<uint64_t> checksums;   // Of `page`.
    std::vector<std::string> lacking;  // Peers that answered "not cached here".
    Status last_error;                 // Why the last peer that failed did (OK if none did).
  };
  // Asks every worker in `ids` for the whole page at once (PeerRead; needs options_.peers) and
  // takes the first intact copy; waits at most `wait`. A peer that is unknown, fails, is late,
  // lacks the page or sends bytes that do not match its checksums is skipped.
  PeerAnswers ReadFromPeers(const protocol::PageRef& page, const std::vector<std::string>& ids,
                            uint32_t page_length, std::chrono::milliseconds wait);
  // Tells each worker in `ids` to copy the page from this one (CopyFromPeer), in the background.
  void CopyToReplicas(const protocol::PageRef& page, const std::vector<std::string>& ids);
  // A fetch of `id` whose source read has finished successfully (its bytes are in memory, maybe
  // still being written to the store), or null.
  std::shared_ptr<Fetch> FinishedFetch(const FetchKey& id) EXCLUDES(mu_);
  // OK if the fetched page holds exactly `page_length` bytes (the length the request's object
  // size gives); FailedPrecondition otherwise. A request's range is only ever cut from bytes
  // that exist: a joiner naming another object size than the fetch's leader is refused.
  Status CheckFetchedLength(const Fetch& fetch, uint32_t page_length,
                            const protocol::PageRef& page);
  // Counts a request served without a source read: a hit, or a page sent to a peer.
  void CountHit(MountMetrics* per_mount, bool for_peer, uint64_t bytes);
  void StoreAndRetire(const pagestore::PageKey& key, const FetchKey& id,
                      std::shared_ptr<Fetch> fetch);
  void Retire(const FetchKey& id);

  // The mount at `path` (waiting up to options_.unknown_mount_wait for it); *table keeps it
  // alive, *metrics is its series.
  StatusOr<const mount::Mount*> FindMount(const std::string& path,
                                          std::shared_ptr<const mount::MountTable>* table,
                                          MountMetrics** metrics, bool wait) EXCLUDES(mounts_mu_);
  // `lookup` on the mount table and, while it fails and `wait`, on each newer table until
  // options_.unknown_mount_wait has passed.
  template <typename Result, typename Lookup>
  Result LookUpWaiting(Lookup lookup, bool wait) REQUIRES(mounts_mu_);
  // Each mount's series, by mount path (made on a mount's first appearance, never removed).
  using MountMetricsMap = std::unordered_map<std::string, MountMetrics*>;
  std::shared_ptr<const MountMetricsMap> BindMetrics(const mount::MountTable& table);

  mutable Mutex mounts_mu_;
  CondVar mounts_cv_;  // The mount table changed.
  std::shared_ptr<const mount::MountTable> mounts_ GUARDED_BY(mounts_mu_);
  // The series of mounts_'s mounts, bound when the table is set: a request finds its mount's
  // counters with the mount, under the one lock it takes anyway.
  std::shared_ptr<const MountMetricsMap> mount_metrics_ GUARDED_BY(mounts_mu_);
  pagestore::PageStore* store_;
  metrics::Registry* const registry_;
  PageServiceOptions options_;
  std::unique_ptr<Metrics> metrics_;

  // May be held while the store is asked whether it holds a page (Contains, for a read-ahead
  // run's pages: an index lookup; while a start's scan runs, a probe of the page's file; the
  // removal of an expired page). The store never calls into the service.
  Mutex mu_;
  // Pages being fetched or written, by page id and length. The length is part of the key
  // because it comes from the request: a request naming another object size than a fetch in
  // flight must not join it (its range would be cut from bytes that do not exist); it runs its
  // own fetch, which the source confirms or refutes.
  std::unordered_map<FetchKey, std::shared_ptr<Fetch>, FetchKeyHasher> in_flight_ GUARDED_BY(mu_);
  std::atomic<size_t> pending_stores_{0};
  std::atomic<PendingFiles*> pending_files_{nullptr};
  // Replica copies in flight; shared with their callbacks, which may outlive the service.
  std::shared_ptr<std::atomic<size_t>> replica_copies_ = std::make_shared<std::atomic<size_t>>(0);
  std::unique_ptr<ThreadPool> store_pool_;
  std::unique_ptr<ThreadPool> replica_pool_;  // Sends replica copies (a local peer runs them).
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_PAGE_SERVICE_H_
