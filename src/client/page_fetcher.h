// PageFetcher: reads verified byte ranges of pages from the worker that owns them.
//
// The owner comes from the placement ring (rendezvous hashing over the worker list). Each reply
// is verified chunk by chunk against the checksums the worker sent (end to end: the worker sends
// what it stored; a flipped bit anywhere between its disk and here is caught). A failed check is
// retried once with kFlagRefetch (the worker drops its copy and refetches). If the owner cannot
// serve (unreachable, stalled, failing), the next candidate worker is tried, then the
// under-storage is read directly: a reader never sees a worker fault.
//
// Thread-safety: thread-safe.
#ifndef CAIRN_CLIENT_PAGE_FETCHER_H_
#define CAIRN_CLIENT_PAGE_FETCHER_H_

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cairn/client.h"
#include "mount/mount_table.h"
#include "placement/ring.h"
#include "protocol/page_channel.h"

namespace cairn::client {

// An open object: what every page request about it needs.
struct ObjectRef {
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
};

class PageFetcher {
 public:
  // `channels` maps each ring node id to the channel that reaches it (owned). An empty ring with
  // no channels is allowed: every read then goes to the under-storage.
  PageFetcher(uint32_t page_size, placement::Ring ring,
              std::unordered_map<std::string, std::unique_ptr<protocol::PageChannel>> channels,
              int max_worker_attempts);

  // Reads out.size() bytes at `offset` within page `page_index` of the object (the range must
  // lie inside the page). FailedPrecondition if the object changed, NotFound if it is gone,
  // Unavailable if neither the workers nor the under-storage could serve it.
  Status ReadRange(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                   std::span<char> out);

  uint32_t page_size() const { return page_size_; }
  FetcherCounters& counters() { return counters_; }

 private:
  // One attempt on one channel; verifies the reply. `dest` is the aligned range buffer.
  Status TryChannel(protocol::PageChannel* channel, const protocol::ReadPageRequest& request,
                    protocol::ByteRange range, std::span<char> dest);
  // Reads the range from the page file of a worker on this machine and verifies it; false on
  // any miss or failure (the caller then asks the worker).
  bool TryShortCircuit(const std::vector<std::string>& dirs, const ObjectRef& object,
                       uint64_t page_index, protocol::ByteRange range, std::span<char> dest);
  Status ReadFromSource(const ObjectRef& object, uint64_t page_index, uint32_t offset,
                        std::span<char> out);
  std::vector<protocol::PageChannel*> ChannelsFor(const ObjectRef& object, uint64_t page_index);

  uint32_t page_size_;
  placement::Ring ring_;
  std::unordered_map<std::string, std::unique_ptr<protocol::PageChannel>> channels_;
  int max_worker_attempts_;
  FetcherCounters counters_;
};

// Verifies `data` (starting at a chunk boundary) against per-chunk checksums.
bool VerifyChunks(std::span<const char> data, const std::vector<uint64_t>& checksums);

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_PAGE_FETCHER_H_
