// PageBuffer: whole pages fetched ahead of sequential readers (readahead), shared by every open
// file of the client, bounded in bytes (least recently used pages go first). A page is charged
// what it costs in memory (Footprint), not its length: the last page of a 50-byte file still
// takes an aligned 4 KiB allocation and a slot, and 10,000 such files charged 50 bytes each
// held 80 MiB while the buffer believed it held 0.5 MiB.
//
// A slot is created empty when a fetch starts; readers that need that page meanwhile wait for
// it instead of fetching it a second time. Pages are keyed by object id, version and page
// index, so a changed object never reads another version's buffered bytes.
// Thread-safety: thread-safe.
#ifndef CAIRN_CLIENT_PAGE_BUFFER_H_
#define CAIRN_CLIENT_PAGE_BUFFER_H_

#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/aligned_buffer.h"
#include "common/checksum.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace cairn::client {

// Recycles the memory of whole-page slots. glibc serves a 1 MiB allocation with a fresh mmap
// (and frees it with munmap), so without this every fetched page cost 256 page faults: a quarter
// of the CPU of a warm sequential read (docs/benchmarks.md). Keeps at most `max_free` buffers.
// Buffers are kDirectIoAlignment-aligned, so a page read from a local page file can go from the
// disk straight into them (PageReader::ReadDirectAt).
// Thread-safety: thread-safe.
class PageMemory {
 public:
  PageMemory(size_t page_size, size_t max_free) : page_size_(page_size), max_free_(max_free) {}

  // `n` uninitialised bytes; a recycled buffer when n is the page size and one is free.
  AlignedBytes Take(size_t n) EXCLUDES(mu_);
  // Hands back what Take(n) returned; kept for reuse if it is a whole page and there is room.
  void Give(AlignedBytes bytes, size_t n) EXCLUDES(mu_);

 private:
  const size_t page_size_;
  const size_t max_free_;
  Mutex mu_;
  std::vector<AlignedBytes> free_ GUARDED_BY(mu_);
};

class PageBuffer {
 public:
  struct Slot {
    Mutex mu;
    CondVar cv;
    bool ready GUARDED_BY(mu) = false;
    Status status GUARDED_BY(mu);
    // The page's bytes: sized once by Allocate (left uninitialised: the fetch overwrites all of
    // them), written before ready, immutable after.
    AlignedBytes bytes;
    size_t length = 0;
    std::shared_ptr<PageMemory> memory;  // Where `bytes` come from and go back to.

    Slot() = default;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() {
      if (memory && bytes) memory->Give(std::move(bytes), length);
    }

    // Called once, by the fetcher, before the fetch.
    std::span<char> Allocate(size_t n) {
      bytes = memory ? memory->Take(n) : AllocateAligned(n);
      length = n;
      return {bytes.get(), n};
    }
    std::span<const char> data() const { return {bytes.get(), length}; }

    // Blocks until the fetch finished; returns its status.
    Status Wait() {
      MutexLock l(&mu);
      cv.Wait(&mu, [this]() REQUIRES(mu) { return ready; });
      return status;
    }
    void Finish(Status s) {
      {
        MutexLock l(&mu);
        ready = true;
        status = std::move(s);
      }
      cv.NotifyAll();
    }
  };

  // `page_size`: the size of whole pages, whose memory is recycled.
  PageBuffer(uint64_t capacity_bytes, size_t page_size)
      : capacity_(capacity_bytes),
        memory_(std::make_shared<PageMemory>(page_size, kMaxFreePages)) {}

  // What a page of `bytes` bytes is charged against the capacity: its allocation rounded up to
  // the alignment, plus the alignment's slack and the slot's bookkeeping (one more unit).
  static constexpr uint64_t Footprint(uint64_t bytes) {
    return (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment +
           kDirectIoAlignment;
  }

  // The slot for a page, or null.
  std::shared_ptr<Slot> Find(const Hash128& id) EXCLUDES(mu_);
  // Creates an empty slot for a page about to be fetched (reserving Footprint(`bytes`)); returns
  // null if a slot exists already (someone else fetches it).
  std::shared_ptr<Slot> Create(const Hash128& id, uint64_t bytes) EXCLUDES(mu_);
  // Drops a slot (a failed fetch).
  void Erase(const Hash128& id) EXCLUDES(mu_);

 private:
  struct Entry {
    std::shared_ptr<Slot> slot;
    uint64_t charged;  // Footprint of the page's length.
    std::list<Hash128>::iterator lru;
  };
  // Evicted slots free their memory as fast as new ones take some; a few spares absorb bursts.
  static constexpr size_t kMaxFreePages = 16;

  Mutex mu_;
  uint64_t capacity_;
  const std::shared_ptr<PageMemory> memory_;
  uint64_t used_ GUARDED_BY(mu_) = 0;
  std::unordered_map<Hash128, Entry, Hash128Hasher> entries_ GUARDED_BY(mu_);
  std::list<Hash128> lru_ GUARDED_BY(mu_);  // Front = most recently used.
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_PAGE_BUFFER_H_
