// PageFetcher: reads verified byte ranges of pages from the worker that owns them.
//
// The owner comes from the placement ring (rendezvous hashing over the worker list), which is
// replaced whole when membership changes (SetWorkers): a read in flight keeps the ring and the
// channels it started with. Each reply
// is verified chunk by chunk against the checksums the worker sent (end to end: the worker sends
// what it stored; a flipped bit anywhere between its disk and here is caught). A failed check is
// retried once with ReadPage refetch (the worker checks its copy, and drops and refetches it if
// it is damaged). If the owner cannot
// serve (unreachable, stalled, failing), the next candidate worker is tried, then the
// under-storage is read directly: a reader never sees a worker fault.
//
// Replicas: a mount with `replicas` = R > 1 has each page cached on the first R workers the ring
// names for it. Reads are spread over them (each client prefers one of the R per page, by a
// per-client salt, so many clients reading one hot page hit all R). Replication is the
// workers' job (worker/page_service.h): the preferred replica answers a miss from another
// replica or the source and has the others copy the page, so a read is one round trip whatever
// R. If it cannot answer, the next replica is tried, then the other workers, then the source.
//
// Thread-safety: thread-safe.
#ifndef CAIRN_CLIENT_PAGE_FETCHER_H_
#define CAIRN_CLIENT_PAGE_FETCHER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cairn/client.h"
#include "common/thread_annotations.h"
#include "mount/mount_table.h"
#include "placement/ring.h"
#include "protocol/page_channel.h"

namespace cairn::client {

// An open object: what every page request about it needs.
struct ObjectRef {
  // Keeps `mount` alive while the file is open, whatever mount-table changes happen meanwhile.
  std::shared_ptr<const mount::MountTable> table;
  const mount::Mount* mount = nullptr;
  std::string key;
  std::string object_id;  // mount->ObjectId(key)
  FileInfo info;          // Pinned at open: size and version.
};

struct FetcherCounters {
  std::atomic<uint64_t> page_reads{0};
  std::atomic<uint64_t> page_read_failures{0};
  std::atomic<uint64_t> fallback_bytes{0};
  std::atomic<uint64_t> checksum_failures{0};
  std::atomic<uint64_t> short_circuit_reads{0};
  std::atomic<uint64_t> ring_updates{0};  // SetWorkers calls that changed the worker set.
};

// Makes the channel to one worker (a transport::RemoteChannel in production). Must not return null.
using ChannelFactory =
    std::function<std::unique_ptr<protocol::PageChannel>(const placement::WorkerNode&)>;

class PageFetcher {
 public:
  // Starts with no workers (every read goes to the under-storage until SetWorkers).
  // `max_worker_attempts` bounds the workers tried per page (at least replicas + 1).
  PageFetcher(uint32_t page_size, ChannelFactory factory, int max_worker_attempts);

  // Replaces the worker set. Channels of workers whose id and address did not change are kept
  // (with their connections); the others are made with the factory. Channels of removed workers
  // are destroyed once no read in flight uses them. InvalidArgument for a bad node list
  // (duplicate or empty id, bad weight): the previous set stays. Thread-safe.
  Status SetWorkers(std::vector<placement::WorkerNode> nodes);

  // The current worker nodes (sorted by id). Thread-safe.
  std::vector<placement::WorkerNode> workers() const;

  // The outcome of one control request (load, probe or drop) sent to several workers.
  struct ControlResult {
    int sent = 0;
    int was_cached = 0;  // Workers that had the page when the request arrived.
    int from_peer = 0;   // Workers that did not and copied it from a replica (loads only).
    int failed = 0;      // Workers that could not answer (down, no such mount, ...).
    Status first_error;
  };
  enum class ControlOp { kLoad, kProbe, kDrop };
  // Sends a control request (LoadPage, ProbePage or DropPage) for one page to the first
  // `copies` workers the ring names for it (its replicas, preferred order; copies <= 0 means
  // every worker, as a free needs), and calls `done` once, on a channel thread or inline, when
  // all have answered. A load of several replicas loads the first, then has the others copy
  // from it (CopyFromPeer). No workers: `done` gets sent == 0. Thread-safe.
  void Control(const ObjectRef& object, uint64_t page_index, ControlOp op, int copies,
               std::function<void(const ControlResult&)> done);

  // Reads out.size() bytes at `offset` within page `page_index` of the object (the range must
  // lie inside the page). FailedPrecondition if the object changed, NotFound if it is gone,
  // Unavailable if neither the workers nor the under-storage could serve it. A file of a
  // write-back mount not yet uploaded (its version is a protocol::PendingVersion) is read from
  // the owner of its path, the only worker that has it.
  Status ReadRange(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                   std::span<char> out);

  // Sends a metadata request (StatPath, ListDir) to the workers the ring names for its path,
  // the owner first (so one worker answers for one directory), trying the next on Unavailable
  // or DeadlineExceeded (down, stalled, not yet holding the mount or the policy), at most
  // max_worker_attempts. Unavailable when no worker answered (none known, all down); any other
  // error is the worker's answer (PermissionDenied, NotFound, ...). Thread-safe.
  StatusOr<protocol::MetadataReply> Metadata(const protocol::MetadataRequest& request);

  // The workers that may own writes of `path`, the owner first (the ring's order for the
  // path's hash, as for metadata), at most max_worker_attempts. Empty when none is known.
  std::vector<std::shared_ptr<protocol::PageChannel>> OwnersOf(const std::string& path) const;

  // Every worker this fetcher knows (cairn sync asks them all). Thread-safe.
  std::vector<std::pair<std::string, std::shared_ptr<protocol::PageChannel>>> AllWorkers() const;

  uint32_t page_size() const { return page_size_; }
  // Reads as one-pass scans: workers serve misses without caching them (ReadPage no_cache).
  // Call before the first read.
  void set_no_cache(bool no_cache) { no_cache_ = no_cache; }
  FetcherCounters& counters() { return counters_; }

 private:
  // The current ring and the channel of each of its nodes (immutable once published).
  struct Placement {
    placement::Ring ring;
    std::unordered_map<std::string, std::shared_ptr<protocol::PageChannel>> channels;
  };
  // The workers to try for a page, best first: its replicas (the preferred one first), then
  // the next workers the ring names.
  struct Plan {
    std::vector<std::shared_ptr<protocol::PageChannel>> channels;
  };

  std::shared_ptr<const Placement> Current() const EXCLUDES(mu_);
  Plan PlanFor(const Placement& placement, const ObjectRef& object, uint64_t page_index) const;
  // One ReadPage on one channel; verifies the reply. `dest` is the aligned range buffer.
  StatusOr<protocol::PageSource> TryChannel(protocol::PageChannel* channel,
                                            const protocol::ReadPageRequest& request,
                                            protocol::ByteRange range, std::span<char> dest);
  // Reads the range from the page file of a worker on this machine and verifies it; false on
  // any miss or failure (the caller then asks the worker).
  bool TryShortCircuit(const std::vector<std::string>& dirs, const ObjectRef& object,
                       uint64_t page_index, protocol::ByteRange range, std::span<char> dest);
  Status ReadFromSource(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                        std::span<char> out);
  // A page of a file not yet uploaded (a pending version: write-back): only the path's owner
  // has it (the next worker after a failover, which answers FailedPrecondition: the file
  // changed), never the source. `dest` holds the aligned range; `out`, when not empty, gets
  // the asked bytes copied from it.
  Status ReadPending(const ObjectRef& object, const protocol::ReadPageRequest& request,
                     protocol::ByteRange range, std::span<char> dest, std::span<char> out);

  const uint32_t page_size_;
  const ChannelFactory factory_;
  const int max_worker_attempts_;
  const uint64_t spread_salt_;  // Random per fetcher: which replica this client prefers.
  bool no_cache_ = false;       // Every read is a one-pass scan (ReadPage no_cache).
  FetcherCounters counters_;
  mutable Mutex mu_;
  std::shared_ptr<const Placement> placement_ GUARDED_BY(mu_);
};

// Verifies `data` (starting at a chunk boundary) against per-chunk checksums.
bool VerifyChunks(std::span<const char> data, const std::vector<uint64_t>& checksums);

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_PAGE_FETCHER_H_
