// PageStore: fixed-size pages of under-storage objects cached in files on local disks.
//
// A page is identified by PageKey (object identity, object version, page index), so a changed
// source object can never be served from old pages. Each page file carries its full key and one
// XXH3-64 checksum per kChecksumChunkSize chunk; see docs/pagestore.md for the on-disk format.
//
// Capacity: each cache folder has a byte budget that is never exceeded. Page files, their
// headers (counted rounded up to the 4 KiB block) and pages being written (reserved before the
// write starts) all count, as do the folder's own directories (one block each) and 64 bytes of
// directory entry per page. Room is made by evicting pages the folder's EvictionPolicy picks.
// A page goes to the folder chosen by a consistent hash of its id over the list of folders:
// stable across restarts as long as the list keeps its order (appending a folder moves only
// 1/n of the pages; the moved pages become misses and age out of their old folder).
//
// Restart: Create returns at once; a background scan per folder re-indexes the pages already on
// disk (by listing, plus one header read per page to learn its object id) while pages are already
// served: an Open of a page the scan has not reached yet looks for its file by name.
//
// Cache rules (docs/pagestore.md, "Cache rules"): an AttributeResolver maps a page's object id to
// its EntryHints (group = mount, priority class, pinned, TTL deadline). Pinned pages are never
// evicted; low-priority pages go first; a group over its quota evicts its own pages; pages whose
// deadline has passed are never served and are removed by a background sweeper.
//
// Thread-safety: all methods are thread-safe. A PageReader stays valid after its page is evicted
// or removed (it holds the file open), so readers never race with eviction.
#ifndef CAIRN_PAGESTORE_PAGE_STORE_H_
#define CAIRN_PAGESTORE_PAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/checksum.h"
#include "common/clock.h"
#include "common/status.h"
#include "policy/eviction_policy.h"

namespace cairn::pagestore {

class Disk;  // pagestore/disk.h

struct PageKey {
  std::string object_id;  // UFS root URI + '/' + key; unique across mounts.
  std::string version;    // ETag or size-mtime; part of the identity.
  uint64_t page_index = 0;

  // Canonical byte form stored in the page header: object_id '\0' version '\0' decimal index.
  // (Keys whose object_id or version contain '\0' are refused by the store: they would be
  // ambiguous.)
  std::string Serialize() const;
  // Hash128Of(Serialize()): names the page file and indexes it in memory.
  Hash128 Id() const;
};

// What a page's attributes are, from its object id (PageKey::object_id: UFS root URI + '/' +
// key): group (mount), priority, pinned and expires_at_us (a deadline on PageStoreOptions::clock's
// NowMicros(), 0 = never; `cold` is ignored). Called at Put, when recovery adopts a page, and by
// Reattribute, with no store lock held except, for a page adopted by name during recovery, that
// page's path lock. Must be thread-safe, cheap (no I/O) and must not call back into the store.
using AttributeResolver = std::function<policy::EntryHints(std::string_view object_id)>;

// Why a page left the cache without being asked to (Remove is not reported).
enum class EvictionReason { kCapacity, kQuota, kExpired };

// Told about every page evicted to make room (capacity, or its mount over quota) or swept after
// its TTL, with its object id ("" if unknown) and its charge in bytes. Called with no store lock
// held, on the evicting or sweeping thread; must be thread-safe and cheap.
using EvictionListener =
    std::function<void(std::string_view object_id, uint64_t bytes, EvictionReason reason)>;

struct CacheDirOptions {
  std::string path;  // Created 0700 if missing; must not be world-writable.
  // Hard byte budget for this folder; at least ~1.03 MiB (its 258 directories) plus one page.
  uint64_t capacity_bytes = 0;
};

struct PageStoreOptions {
  std::vector<CacheDirOptions> dirs;    // At least one.
  uint32_t page_size = 1 << 20;         // Largest page accepted by Put.
  std::string eviction_policy = "lru";  // Name understood by MakeEvictionPolicy.
  Clock* clock = Clock::Real();
  // The file system seam; null means the real local disk (PosixDisk()). Tests pass a MemDisk.
  std::shared_ptr<Disk> disk;
  // Threads per folder listing it at startup (more help on cold NVMe: fstatat latency overlaps).
  int recovery_threads_per_dir = 4;
  // The cache rules of each page (see AttributeResolver). Unset: every page gets default hints
  // (group 0, kNormal, not pinned, no TTL).
  AttributeResolver attributes;
  // Reports of evicted pages (e.g. the worker's top evicted prefixes); may be empty.
  EvictionListener on_evict;
};

// The smallest read that PageReader::ReadDirectAt sends around the page cache. Below it, reads
// go through the page cache: O_DIRECT makes each one a device read, while a page cache that
// holds a hot small page serves it from memory.
inline constexpr uint32_t kDirectReadMinBytes = 256 * 1024;

// An open cached page. It holds the page file open: it stays readable after the page is evicted,
// removed or replaced, and may outlive the PageStore. (An evicted page's disk blocks are freed
// when its last reader closes; readers are meant to be short-lived.)
// Thread-safety: all methods are const and safe to call concurrently (positional reads).
class PageReader {
 public:
  virtual ~PageReader() = default;
  // Bytes of page data (<= page_size; the last page of an object is shorter).
  virtual uint32_t data_length() const = 0;
  // One checksum per chunk of the page data (ChunkCount(data_length()) entries).
  virtual const std::vector<uint64_t>& chunk_checksums() const = 0;
  // Reads out.size() bytes of page data starting at `offset`. The bytes are NOT verified: check
  // them against chunk_checksums() (or call VerifyPage). InvalidArgument if offset + size >
  // data_length(); IoError on a read error or a short read (the file was truncated under us:
  // treat as corruption).
  virtual Status ReadAt(uint32_t offset, std::span<char> out) const = 0;
  // ReadAt for a caller that keeps the bytes in a cache of its own (the client's page buffer,
  // then the kernel's cache of the FUSE file): a read of at least kDirectReadMinBytes bypasses
  // the OS page cache where it can (RandomAccessFile::ReadDirectAt), so a page read from local
  // disk is neither copied by the kernel nor kept in memory twice; a smaller one is ReadAt (the
  // page cache is the only memory tier of small random reads). Same bytes, same errors as
  // ReadAt. This default is ReadAt.
  virtual Status ReadDirectAt(uint32_t offset, std::span<char> out) const {
    return ReadAt(offset, out);
  }
  // For zero-copy sending: the open file descriptor and the file offset of data byte 0, or -1
  // when the page is not backed by a real file (in-memory disk).
  virtual int native_fd() const = 0;
  virtual uint64_t data_file_offset() const = 0;
  // Which stored copy of the page this reader reads: a Put that replaces the page makes a copy
  // with another id. PageStore::RemoveCopy takes it. 0 for a reader that no store owns
  // (OpenPageReadOnly's); every reader PageStore::Open returns has a non-zero id.
  virtual uint64_t copy_id() const { return 0; }
};

struct PageStoreStats {
  uint64_t pages = 0;
  uint64_t used_bytes = 0;  // Including reservations for pages being written.
  uint64_t capacity_bytes = 0;
  uint64_t pinned_bytes = 0;        // Charges of pinned pages (part of used_bytes).
  uint64_t evictions = 0;           // All evictions: capacity_evictions + quota_evictions.
  uint64_t capacity_evictions = 0;  // To make room in the folder.
  uint64_t quota_evictions = 0;     // Because the inserting page's group was over its quota.
  uint64_t expired_pages = 0;       // Dropped because their TTL deadline passed (not evictions).
  uint64_t freed_pages = 0;         // Remove(..., kFreed).
  uint64_t invalidated_pages = 0;   // Remove(..., kInvalidated).
  uint64_t corrupt_pages = 0;    // Pages dropped because a check failed (header, size, checksum).
  uint64_t recovered_pages = 0;  // Pages found on disk at startup.
  bool recovering = false;       // Startup scan still running.
};

enum class RemoveReason { kCorrupt, kInvalidated, kFreed };

class PageStore {
 public:
  virtual ~PageStore() = default;

  // Opens (and recovers) the cache folders. A missing folder is created (mode 0700; its parent
  // must exist); each gets the sub-folders v1/00..v1/ff (0700) and a LOCK file.
  // Errors: PermissionDenied if a folder is world-writable or not writable by this process;
  // InvalidArgument for bad options (no folders, a folder listed twice, page_size of 0 or over
  // 1 GiB, a capacity that cannot hold one page, an unknown eviction policy);
  // FailedPrecondition if a folder is locked by another page store or is not a directory;
  // NotFound if a folder's parent is missing; IoError for other disk errors.
  // Recovery of existing pages runs in background threads (Stats().recovering); pages are
  // servable (Open) before it finishes. The caller owns the store; destroy it only after every
  // other call on it returned (destruction stops the recovery threads and the TTL sweeper).
  static StatusOr<std::unique_ptr<PageStore>> Create(const PageStoreOptions& options);

  // Opens a cached page for reading and marks it recently used. NotFound if not cached, or if its
  // TTL deadline has passed (the page is then dropped and counted in expired_pages).
  // Corruption if the page file is truncated or holds another key: the file is dropped and counted.
  // Checksums of the data are NOT verified here (the reader verifies end to end), except by
  // VerifyPage below and for a page file of format 1 (64 KiB chunks, older builds), which is
  // verified whole and given 4 KiB checksums (Corruption, dropped, if it fails). IoError if the
  // disk failed (the page is kept). InvalidArgument for a key with '\0' in object_id or version.
  // The caller owns the reader.
  virtual StatusOr<std::unique_ptr<PageReader>> Open(const PageKey& key) = 0;

  // Stores a page (data.size() <= page_size), replacing any existing copy. Writes go to a temp
  // file then rename, so a crash never leaves a half page under the page's name. The page is
  // filed under the resolver's hints for its object id. Makes room first from pages whose TTL
  // passed, then by eviction: from the page's own group while that group would exceed its quota,
  // else by the policy's order (low priority first); pinned pages are never evicted. May wait
  // briefly for writes or removals in flight to finish. OK without writing anything if the
  // resolver gives the page a deadline that has already passed.
  // InvalidArgument if data is larger than page_size or the key is invalid (see Open, or over
  // 16 KiB serialized); ResourceExhausted if room cannot be made (everything left is pinned, or
  // the group is over its quota and has nothing evictable); IoError on disk errors (the
  // reservation is released and no file is left). `data` is only read during the call.
  virtual Status Put(const PageKey& key, std::span<const char> data) = 0;

  // As Put, with the data's chunk checksums (ChunkChecksums(data)) already computed by the
  // caller, who vouches for them (the worker computes them once per fetched page for the reply
  // and the store). InvalidArgument if the count does not match the data.
  virtual Status PutWithChecksums(const PageKey& key, std::span<const char> data,
                                  std::span<const uint64_t> checksums) = 0;

  // As PutWithChecksums, filed at `priority` instead of the resolver's (its group, pin and TTL
  // still apply): pages written through Cairn enter at low priority unless a rule names one.
  // The priority holds until the page is re-resolved (Reattribute after a rules change, a Put
  // racing with one, recovery after a restart), which gives it the resolver's.
  virtual Status PutWithPriority(const PageKey& key, std::span<const char> data,
                                 std::span<const uint64_t> checksums,
                                 policy::Priority priority) = 0;

  // Drops a page (e.g. a reader found a checksum mismatch: reason kCorrupt is counted). OK if it
  // was dropped, NotFound if it was not cached; readers already open keep their copy.
  virtual Status Remove(const PageKey& key, RemoveReason reason) = 0;

  // As Remove, but only while `copy_id` (a PageReader::copy_id() of this store) is still the
  // page's cached copy. A reader that found its copy damaged drops that copy, never one that
  // replaced it meanwhile: several readers of one damaged page each report it, and the first
  // report's refetch must not be dropped by the later ones. OK if dropped; NotFound if the page
  // is not cached or is another copy now; InvalidArgument for copy_id 0 or a bad key.
  virtual Status RemoveCopy(const PageKey& key, uint64_t copy_id, RemoveReason reason) = 0;

  // True if the page is cached (as far as the index or, during recovery, a cheap check of its
  // file can tell; Open may still find it damaged). Does not change its recency. An expired page
  // is not cached: it is dropped as by Open.
  virtual bool Contains(const PageKey& key) = 0;

  // Totals over all folders; a consistent snapshot per folder.
  virtual PageStoreStats Stats() const = 0;

  // ---- Cache rules --------------------------------------------------------------------------

  // Replaces the resolver (an empty function: default hints from now on). Pages already cached
  // keep their hints until Reattribute. Calls in flight may still use the old resolver after
  // this returns (it is kept alive until they finish). Thread-safe.
  virtual void SetAttributeResolver(AttributeResolver resolver) = 0;

  // Re-applies the current resolver to every cached page, after the rules changed (a pin, TTL,
  // priority or group moved). A page whose new deadline has passed is no longer served and is
  // dropped by the next sweep. A Put racing with this call ends with the hints of the rules in
  // force when this call started, or later ones. Walks each folder's index in chunks of a few
  // hundred pages, releasing the folder's lock between chunks and calling the resolver with no
  // lock held: O(pages) in total, but readers and writers wait for at most one chunk.
  // Thread-safe; returns when every folder has been walked.
  virtual void Reattribute() = 0;

  // Sets the per-worker byte cap of `group` (a mount); 0 removes it. Split over the folders by
  // capacity share (each folder gets at least 1 byte of a non-zero quota). Charges count as in
  // used_bytes; pinned pages count too. A group that would exceed its quota evicts its own pages
  // to admit a new one (or the Put fails with ResourceExhausted if none can go). Pages already
  // over a lowered quota stay until the group inserts again. Thread-safe.
  virtual void SetGroupQuota(uint32_t group, uint64_t bytes) = 0;

  // Bytes (charges) of the pages of `group` cached now, summed over the folders; pinned pages
  // included, writes in flight not. Thread-safe.
  virtual uint64_t GroupBytes(uint32_t group) const = 0;

  // Drops every page whose TTL deadline is <= the clock's now and returns how many it dropped.
  // A background thread does this on its own (at the next deadline, at least once a second);
  // call it to reclaim at a known moment (e.g. tests with a FakeClock). Thread-safe.
  virtual size_t SweepExpired() = 0;
};

// Forwards every call to `target` (not owned; must outlive the wrapper); subclass it to observe
// or change some calls (tests: a page stored between two of a request's steps).
class PageStoreWrapper : public PageStore {
 public:
  explicit PageStoreWrapper(PageStore* target) : target_(target) {}
  StatusOr<std::unique_ptr<PageReader>> Open(const PageKey& key) override {
    return target_->Open(key);
  }
  Status Put(const PageKey& key, std::span<const char> data) override {
    return target_->Put(key, data);
  }
  Status PutWithChecksums(const PageKey& key, std::span<const char> data,
                          std::span<const uint64_t> checksums) override {
    return target_->PutWithChecksums(key, data, checksums);
  }
  Status PutWithPriority(const PageKey& key, std::span<const char> data,
                         std::span<const uint64_t> checksums, policy::Priority priority) override {
    return target_->PutWithPriority(key, data, checksums, priority);
  }
  Status Remove(const PageKey& key, RemoveReason reason) override {
    return target_->Remove(key, reason);
  }
  Status RemoveCopy(const PageKey& key, uint64_t copy_id, RemoveReason reason) override {
    return target_->RemoveCopy(key, copy_id, reason);
  }
  bool Contains(const PageKey& key) override { return target_->Contains(key); }
  PageStoreStats Stats() const override { return target_->Stats(); }
  void SetAttributeResolver(AttributeResolver resolver) override {
    target_->SetAttributeResolver(std::move(resolver));
  }
  void Reattribute() override { target_->Reattribute(); }
  void SetGroupQuota(uint32_t group, uint64_t bytes) override {
    target_->SetGroupQuota(group, bytes);
  }
  uint64_t GroupBytes(uint32_t group) const override { return target_->GroupBytes(group); }
  size_t SweepExpired() override { return target_->SweepExpired(); }

 protected:
  PageStore* target() { return target_; }

 private:
  PageStore* target_;
};

// Opens a cached page straight from the folders of a store that another process owns: the
// short-circuit read of a client that shares the machine with its worker. `dirs` must be the
// owner's cache folders in the owner's order (the worker sends them in its Hello reply).
// Read-only and lock-free: it never changes the store, and a concurrent eviction at worst makes
// it return NotFound. NotFound if not cached; Corruption if the file fails the header checks
// (it is left for the owner to drop); IoError otherwise. Data checksums are not verified
// (except for a format-1 page, as in PageStore::Open).
StatusOr<std::unique_ptr<PageReader>> OpenPageReadOnly(const std::vector<std::string>& dirs,
                                                       const PageKey& key);

// Verifies every chunk of an open page against its stored checksums. Corruption on a mismatch
// (then call Remove(key, kCorrupt)); errors of ReadAt are returned as they are. Thread-safe.
Status VerifyPage(const PageReader& reader);

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_PAGE_STORE_H_
