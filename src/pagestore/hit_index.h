// HitIndex: the pages of one cache folder whose files are kept open, sharded so that a cache hit
// takes one shard lock instead of the folder's mutex (CacheDir::mu_, which guards the index, the
// eviction policy and the byte accounting).
//
// It mirrors part of CacheDir's index: the folder inserts a page when it keeps the page's file
// open, and erases it, under its mutex, whenever the page's entry changes (erased, replaced by a
// new copy, its hints updated, its file no longer kept). So a page found here is indexed, its
// file is the one the index keeps, and its TTL deadline is the one stored here.
//
// Accesses. A hit found here is appended to its shard's access log instead of being told to the
// eviction policy at once. A log that reaches kMaxPendingAccesses is handed to the caller to
// apply (under the folder's mutex), and the folder takes every log before it picks a victim, so
// the policy has seen every access whenever it decides; between decisions it sees them late.
//
// Lock order: CacheDir::mu_, then one shard lock. Nothing is called under a shard lock.
// Thread-safety: thread-safe.
#ifndef CAIRN_PAGESTORE_HIT_INDEX_H_
#define CAIRN_PAGESTORE_HIT_INDEX_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/checksum.h"
#include "common/thread_annotations.h"
#include "pagestore/page_file.h"

namespace cairn::pagestore {

// A page file kept open for hits, and when (the store's clock) it was last checked to be the
// file its name refers to. Shared with hits in progress, which check it outside every lock.
struct KeptOpenFile {
  KeptOpenFile(std::shared_ptr<const FilePageReader> f, int64_t now_us)
      : file(std::move(f)), checked_us(now_us) {}
  const std::shared_ptr<const FilePageReader> file;
  std::atomic<int64_t> checked_us;
};

class HitIndex {
 public:
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxPendingAccesses = 64;

  struct Hit {
    std::shared_ptr<KeptOpenFile> file;
    uint64_t generation = 0;  // CacheDir's generation of the indexed copy.
  };

  // The page's kept-open file, if the page is here and its deadline (0: none) is after
  // `now_us`; the access is logged. When the shard's log is full it is moved into `*full_log`
  // (left empty otherwise), for the caller to apply to the policy.
  std::optional<Hit> Find(const Hash128& id, int64_t now_us, std::vector<Hash128>* full_log);
  // Adds or replaces a page.
  void Insert(const Hash128& id, Hit hit, int64_t expires_at_us);
  void Erase(const Hash128& id);
  // Moves every shard's access log into `out` (appended).
  void TakeAccesses(std::vector<Hash128>* out);
  size_t size() const;

 private:
  struct Entry {
    Hit hit;
    int64_t expires_at_us = 0;
  };
  struct Shard {
    mutable Mutex mu;
    std::unordered_map<Hash128, Entry, Hash128Hasher> pages GUARDED_BY(mu);
    std::vector<Hash128> accesses GUARDED_BY(mu);
  };
  Shard& ShardOf(const Hash128& id) { return shards_[id.high % kShards]; }

  std::array<Shard, kShards> shards_;
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_HIT_INDEX_H_
