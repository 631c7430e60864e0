// PageStore: fixed-size pages of under-storage objects cached in files on local disks.
//
// A page is identified by PageKey (object identity, object version, page index), so a changed
// source object can never be served from old pages. Each page file carries its full key and one
// XXH3-64 checksum per kChecksumChunkSize chunk; see docs/pagestore.md for the on-disk format.
//
// Capacity: each cache folder has a byte budget that is never exceeded. Page files, their
// headers (counted rounded up to the 4 KiB block) and pages being written (reserved before the
// write starts) all count. Room is made by evicting pages the folder's EvictionPolicy picks.
//
// Thread-safety: all methods are thread-safe. A PageReader stays valid after its page is evicted
// or removed (it holds the file open), so readers never race with eviction.
#ifndef CAIRN_PAGESTORE_PAGE_STORE_H_
#define CAIRN_PAGESTORE_PAGE_STORE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/clock.h"
#include "common/status.h"

namespace cairn::pagestore {

struct PageKey {
  std::string object_id;  // UFS root URI + '/' + key; unique across mounts.
  std::string version;    // ETag or size-mtime; part of the identity.
  uint64_t page_index = 0;

  // Canonical byte form stored in the page header: object_id '\0' version '\0' decimal index.
  std::string Serialize() const;
  // Hash128Of(Serialize()): names the page file and indexes it in memory.
  Hash128 Id() const;
};

struct CacheDirOptions {
  std::string path;           // Created 0700 if missing; must not be world-writable.
  uint64_t capacity_bytes = 0;  // Hard byte budget for this folder (> 0).
};

struct PageStoreOptions {
  std::vector<CacheDirOptions> dirs;  // At least one.
  uint32_t page_size = 1 << 20;       // Largest page accepted by Put.
  std::string eviction_policy = "lru";  // Name understood by MakeEvictionPolicy.
  Clock* clock = Clock::Real();
};

// An open cached page. Not thread-safe for concurrent ReadAt on the same object? It is: pread only.
class PageReader {
 public:
  virtual ~PageReader() = default;
  virtual uint32_t data_length() const = 0;
  // One checksum per chunk of the page data (ChunkCount(data_length()) entries).
  virtual const std::vector<uint64_t>& chunk_checksums() const = 0;
  // Reads out.size() bytes of page data starting at `offset` (offset + size <= data_length()).
  // IoError on a short read (the file was truncated under us): treat as corruption.
  virtual Status ReadAt(uint32_t offset, std::span<char> out) const = 0;
  // For zero-copy sending: the open file descriptor and the file offset of data byte 0, or -1
  // when the page is not backed by a real file (in-memory disk).
  virtual int native_fd() const = 0;
  virtual uint64_t data_file_offset() const = 0;
};

struct PageStoreStats {
  uint64_t pages = 0;
  uint64_t used_bytes = 0;       // Including reservations for pages being written.
  uint64_t capacity_bytes = 0;
  uint64_t evictions = 0;
  uint64_t corrupt_pages = 0;    // Pages dropped because a check failed (header, size, checksum).
  uint64_t recovered_pages = 0;  // Pages found on disk at startup.
  bool recovering = false;       // Startup scan still running.
};

enum class RemoveReason { kCorrupt, kInvalidated };

class PageStore {
 public:
  virtual ~PageStore() = default;

  // Opens (and recovers) the cache folders. PermissionDenied if a root is world-writable or not
  // writable; InvalidArgument for bad options. Recovery of existing pages runs in a background
  // thread; pages are servable (Open) before it finishes.
  static StatusOr<std::unique_ptr<PageStore>> Create(const PageStoreOptions& options);

  // Opens a cached page for reading and marks it recently used. NotFound if not cached.
  // Corruption if the page file is truncated or holds another key: the file is dropped and counted.
  // Checksums of the data are NOT verified here (the reader verifies end to end), except by
  // Verify below.
  virtual StatusOr<std::unique_ptr<PageReader>> Open(const PageKey& key) = 0;

  // Stores a page (data.size() <= page_size), replacing any existing copy. Writes go to a temp
  // file then rename, so a crash never leaves a half page under the page's name.
  // ResourceExhausted if room cannot be made; IoError on disk errors.
  virtual Status Put(const PageKey& key, std::span<const char> data) = 0;

  // Drops a page (e.g. a reader found a checksum mismatch: reason kCorrupt is counted).
  virtual Status Remove(const PageKey& key, RemoveReason reason) = 0;

  virtual bool Contains(const PageKey& key) = 0;

  virtual PageStoreStats Stats() const = 0;
};

// Verifies every chunk of an open page against its stored checksums; Corruption on mismatch.
Status VerifyPage(const PageReader& reader);

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_PAGE_STORE_H_
