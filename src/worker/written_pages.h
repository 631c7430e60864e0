// WrittenPages: the pages of files committed through this worker, put into the cache under the
// version the commit made, so that reading a checkpoint back (a restore, an evaluation on
// another client of the cluster) is a hit rather than a read of what was just uploaded
// (docs/write-path.md, decision 7).
//
// After a commit the write service hands over a descriptor of the file's spool (its bytes as
// committed: a committed session's spool is never written again) and answers the client at
// once. A background thread then takes the file page by page: a page is stored here if this
// worker is one of its replicas (the first R workers the ring names for it, R = the mount's
// replicas; this worker alone without peers), and its other replicas are told to copy it from
// this worker (CopyFromPeer, as after a miss). A page this worker is no replica of is stored here
// only while its copies run, so that it can serve them, and is removed after them (counted by the
// store as freed). Pages enter at low priority, so that a checkpoint does not flush the training
// set, unless a path rule sets a priority (PageRules::WrittenPriority); a path whose admission
// rule is bypass is not cached.
//
// Bounds: the spool bytes queued (`max_pending_bytes`: a file that would pass it is not cached,
// unless nothing else is queued, so one large checkpoint always is) and the copies in flight
// (`max_copies_in_flight`). Everything here is best effort: a page that cannot be stored or
// copied is counted and skipped, and its next read is a miss like any other. A worker that stops
// drops the files it has not cached yet.
//
// Thread-safety: thread-safe. Lock order: mu_ alone; copies' callbacks take window_mu_ alone.
#ifndef CAIRN_WORKER_WRITTEN_PAGES_H_
#define CAIRN_WORKER_WRITTEN_PAGES_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "common/thread_annotations.h"
#include "metrics/registry.h"
#include "mount/mount_table.h"
#include "worker/page_service.h"

namespace cairn::worker {

struct WrittenPagesOptions {
  uint64_t max_pending_bytes = uint64_t{16} << 30;  // Spool bytes kept for caching, queued.
  size_t max_copies_in_flight = 8;                  // CopyFromPeer requests at once.
  std::chrono::milliseconds copy_timeout{120'000};  // Deadline of one copy.
  metrics::Registry* registry = nullptr;            // Not owned; may be null.
};

// A committed file.
struct WrittenFile {
  std::shared_ptr<const mount::MountTable> table;  // Keeps `mount` alive.
  const mount::Mount* mount = nullptr;
  std::string key;      // The object's key in the mount.
  std::string version;  // The version its commit made (what readers will name).
  uint64_t size = 0;
};

struct WrittenPagesStats {
  uint64_t files = 0;          // Files cached (queued and taken).
  uint64_t files_skipped = 0;  // Not cached: over max_pending_bytes, or stopping.
  uint64_t pages_cached = 0;   // Pages stored here as one of their replicas.
  uint64_t pages_copied = 0;   // Copies made by other replicas (CopyFromPeer answered OK).
  uint64_t pages_failed = 0;   // Page stores or copies that failed (the page stays uncached).
};

class WrittenPages {
 public:
  // `pages` (not owned) must outlive this object.
  WrittenPages(PageService* pages, WrittenPagesOptions options);
  // Drops the files not cached yet and waits for the one being cached to finish its page.
  ~WrittenPages();
  WrittenPages(const WrittenPages&) = delete;
  WrittenPages& operator=(const WrittenPages&) = delete;

  // Queues `file`, whose bytes [0, file.size) are those of `spool_fd` (taken: closed when the
  // file is done or dropped). False if it is not queued (see the bounds above; a bypass rule on
  // its path; an empty file).
  bool Admit(WrittenFile file, int spool_fd) EXCLUDES(mu_);

  // Waits until every file queued so far is done (tests; a benchmark's warm restore).
  void WaitIdle() EXCLUDES(mu_);

  WrittenPagesStats stats() const EXCLUDES(mu_);

 private:
  struct Job {
    WrittenFile file;
    int fd = -1;
  };
  struct Metrics;
  struct Window;

  void Loop() EXCLUDES(mu_);
  void CacheFile(const Job& job) EXCLUDES(mu_);
  // Stores page `index` of `job` (bytes in `data`) and asks its other replicas to copy it.
  void CachePage(const Job& job, uint64_t index, std::span<const char> data,
                 policy::Priority priority, Window& window) EXCLUDES(mu_);
  bool stopping() const EXCLUDES(mu_);
  void Count(uint64_t WrittenPagesStats::*field) EXCLUDES(mu_);

  PageService* const pages_;
  const WrittenPagesOptions options_;
  std::unique_ptr<Metrics> metrics_;

  mutable Mutex mu_;
  CondVar changed_;  // A job was queued or finished, or stopping_ was set.
  std::deque<Job> queue_ GUARDED_BY(mu_);
  uint64_t pending_bytes_ GUARDED_BY(mu_) = 0;  // Of queue_ and the job being cached.
  bool busy_ GUARDED_BY(mu_) = false;           // A job is being cached.
  bool stopping_ GUARDED_BY(mu_) = false;
  WrittenPagesStats stats_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_WRITTEN_PAGES_H_
