// PageBuffer: whole pages fetched ahead of sequential readers (readahead), shared by every open
// file of the client, bounded in bytes (least recently used pages go first).
//
// A slot is created empty when a fetch starts; readers that need that page meanwhile wait for
// it instead of fetching it a second time. Pages are keyed by object id, version and page
// index, so a changed object never reads another version's buffered bytes.
// Thread-safety: thread-safe.
#ifndef CAIRN_CLIENT_PAGE_BUFFER_H_
#define CAIRN_CLIENT_PAGE_BUFFER_H_

#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/checksum.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace cairn::client {

class PageBuffer {
 public:
  struct Slot {
    Mutex mu;
    CondVar cv;
    bool ready GUARDED_BY(mu) = false;
    Status status GUARDED_BY(mu);
    std::string data;  // Written before ready; immutable after.

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

  explicit PageBuffer(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The slot for a page, or null.
  std::shared_ptr<Slot> Find(const Hash128& id) EXCLUDES(mu_);
  // Creates an empty slot for a page about to be fetched (reserving `bytes`); returns null if a
  // slot exists already (someone else fetches it).
  std::shared_ptr<Slot> Create(const Hash128& id, uint64_t bytes) EXCLUDES(mu_);
  // Drops a slot (a failed fetch).
  void Erase(const Hash128& id) EXCLUDES(mu_);

 private:
  struct Entry {
    std::shared_ptr<Slot> slot;
    uint64_t bytes;
    std::list<Hash128>::iterator lru;
  };
  Mutex mu_;
  uint64_t capacity_;
  uint64_t used_ GUARDED_BY(mu_) = 0;
  std::unordered_map<Hash128, Entry, Hash128Hasher> entries_ GUARDED_BY(mu_);
  std::list<Hash128> lru_ GUARDED_BY(mu_);  // Front = most recently used.
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_PAGE_BUFFER_H_
