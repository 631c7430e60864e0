// CacheDir: one cache folder of a PageStore: its in-memory index of pages, its byte accounting,
// its eviction policy and its startup recovery scan. PageStore routes each page to one CacheDir.
//
// Accounting: the rule is SpaceAccount's (space_account.h); a page's charge is its file size
// rounded up to 4 KiB plus kDirEntryCharge for its name, and the folder skeleton (root, v1 and
// its 256 sub-folders) is one 4 KiB block each.
//
// Cache rules. Each index entry keeps its page's object id (one shared string per object, see
// ObjectIdInterner), so the folder can ask the AttributeSource for the page's hints at Put, when
// recovery adopts it and at Reattribute; the hints live in the PolicyEngine (pinned pages are in
// no ranking, TTL deadlines in its ordered index, group bytes and quotas per group). The resolver
// is never called under mu_.
//
// Locking. mu_ guards the index, the policy and the counters; no disk I/O happens under it.
// A hit on a page whose file is kept open takes no mu_: it finds the file in hits_ (a sharded
// mirror of those entries, one shard lock) and logs the access for the policy (hit_index.h).
// Operations that change which file a page's name refers to (rename of a new copy + publish,
// unlink, adoption of a file found on disk) hold that name's path lock, one of kPathLocks mutexes
// picked by id. Lock order: path lock, then mu_. A thread never holds two path locks.
//
// Thread-safety: all public methods are thread-safe. The destructor must not run concurrently
// with other calls; it stops and joins the recovery threads.
#ifndef CAIRN_PAGESTORE_CACHE_DIR_H_
#define CAIRN_PAGESTORE_CACHE_DIR_H_

#include <array>
#include <atomic>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "pagestore/disk.h"
#include "pagestore/hit_index.h"
#include "pagestore/layout.h"
#include "pagestore/page_attributes.h"
#include "pagestore/page_file.h"
#include "pagestore/page_store.h"
#include "pagestore/space_account.h"
#include "policy/eviction_policy.h"
#include "policy/policy_engine.h"

namespace cairn::pagestore {

// A PageKey with what is derived from it, computed once per call.
struct KeyInfo {
  explicit KeyInfo(const PageKey& key)
      : serialized(key.Serialize()), page_index(key.page_index), id(Hash128Of(serialized)) {}
  std::string serialized;
  uint64_t page_index;
  Hash128 id;

  std::string_view object_id() const { return ObjectIdOfKey(serialized); }
};

class CacheDir {
 public:
  struct Config {
    std::string path;
    uint64_t capacity_bytes = 0;
    uint32_t page_size = 0;
    std::string eviction_policy;
    int recovery_threads = 4;
    std::shared_ptr<Disk> disk;
    Clock* clock = nullptr;
    // Shared by the store's folders; null: default hints for every page.
    std::shared_ptr<AttributeSource> attributes;
    // Told about each evicted page (see PageStoreOptions::on_evict); may be empty.
    EvictionListener on_evict;
  };

  // Bytes charged for a page's name in its directory (ext4/XFS: ~44 bytes per 32-character
  // entry plus slack in hashed directory blocks).
  static constexpr uint64_t kDirEntryCharge = 64;
  // Root, v1 and 256 sub-folders, one block each.
  static constexpr uint64_t kSkeletonBytes = (2 + kSubdirCount) * uint64_t{4096};
  // The charge of a page file of `file_size` bytes.
  static uint64_t ChargeForFile(uint64_t file_size);

  // Checks and prepares the folder (see PageStore::Create for the errors), takes its lock and
  // starts the recovery scan in the background.
  static StatusOr<std::unique_ptr<CacheDir>> Open(Config config);
  ~CacheDir();
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;

  // The PageStore operations for pages routed to this folder (same contracts).
  StatusOr<std::unique_ptr<PageReader>> OpenPage(const KeyInfo& key) EXCLUDES(mu_);
  // `priority`, if set, replaces the resolver's (PageStore::PutWithPriority).
  Status Put(const KeyInfo& key, std::span<const char> data, std::span<const uint64_t> checksums,
             std::optional<policy::Priority> priority = std::nullopt) EXCLUDES(mu_);
  Status Remove(const KeyInfo& key, RemoveReason reason) EXCLUDES(mu_);
  // `generation`: the copy id of PageStore::RemoveCopy (an Entry's generation).
  Status RemoveCopy(const KeyInfo& key, uint64_t generation, RemoveReason reason) EXCLUDES(mu_);
  bool Contains(const KeyInfo& key) EXCLUDES(mu_);
  PageStoreStats Stats() const EXCLUDES(mu_);

  // Cache rules (cache_dir_rules.cc); contracts as in PageStore.
  void Reattribute() EXCLUDES(mu_);
  void SetGroupQuota(uint32_t group, uint64_t bytes) EXCLUDES(mu_);
  uint64_t GroupBytes(uint32_t group) const EXCLUDES(mu_);
  // Drops the pages whose deadline is <= `now_us`, in chunks; returns how many it dropped.
  size_t SweepExpired(int64_t now_us) EXCLUDES(mu_);
  // The earliest TTL deadline of a page of this folder, if any has one.
  std::optional<int64_t> NextExpiry() const EXCLUDES(mu_);

 private:
  static constexpr size_t kPathLocks = 64;
  static constexpr size_t kMaxOpenFiles = 1024;
  // How long a kept-open page file is trusted to still be the file its name refers to before a
  // hit checks again (a stat of the path and an fstat: more than the rest of a 4 KiB hit). In
  // between, a hit reads the file it opened and checked, which holds the page's own bytes even
  // if the name was swapped or unlinked meanwhile; its size is checked on every hit (one fstat),
  // so a truncated file is never sent. A swapped or replaced name is noticed within this window,
  // and never costs a wrong byte.
  static constexpr int64_t kOpenFileRecheckMicros = 1'000'000;
  // Expired pages taken per hold of mu_ (sweep, Reserve).
  static constexpr size_t kExpiredBatch = 256;
  // Pages re-resolved per hold of mu_ by Reattribute.
  static constexpr size_t kRulesBatch = 512;
  enum class ScanState : uint8_t { kPending, kListing, kDone, kFailed };
  using KeptOpen = KeptOpenFile;
  struct Entry {
    Entry() = default;
    Entry(uint64_t charge_bytes, uint64_t gen, bool is_cold,
          std::shared_ptr<const std::string> object)
        : charge(charge_bytes), generation(gen), cold(is_cold), object_id(std::move(object)) {}
    uint64_t charge = 0;
    // When this copy entered the index (the store's clock): TTLs count from here, so a rules
    // change re-files the page without restarting its TTL.
    int64_t cached_at_us = 0;
    // Changes whenever a new file is published under the page's name, so a thread that found a
    // bad file can tell whether it is still the indexed one before dropping it.
    uint64_t generation = 0;
    // Found on disk at startup and not used since. While the scan runs, only such pages are
    // evicted: evicting pages written since would trade them for unknown old ones.
    bool cold = false;
    // The page file held open with its parsed header, for recently read pages (at most
    // kMaxOpenFiles per folder): a hit then costs no open() and no header read. Dropped with
    // the entry, so an evicted page's blocks are freed when its last reader finishes.
    std::shared_ptr<KeptOpen> open_file;
    std::list<Hash128>::iterator open_lru;
    // The page's object id, shared with the folder's other pages of that object; null if the
    // recovery scan could not read it (the page then has default hints until it is opened).
    std::shared_ptr<const std::string> object_id;
  };
  struct Victim {
    Hash128 id;
    uint64_t charge = 0;
    std::shared_ptr<const std::string> object_id = nullptr;  // Null if unknown (listener).
    EvictionReason reason = EvictionReason::kCapacity;
  };
  // A page about to get (new) hints: its id and the object id it was resolved for.
  struct Attributed {
    Hash128 id;
    std::shared_ptr<const std::string> object_id;
  };
  // The page a Reserve makes room for.
  struct Incoming {
    uint32_t group = 0;
    uint64_t charge = 0;
  };
  using Index = std::unordered_map<Hash128, Entry, Hash128Hasher>;

  CacheDir(Config config, std::unique_ptr<policy::PolicyEngine> policy,
           std::unique_ptr<DiskLock> lock, uint64_t initial_credit, uint64_t nonce);

  Mutex& PathLock(const Hash128& id) { return path_locks_[id.low % kPathLocks]; }
  Disk& disk() { return *config_.disk; }

  // Admission (cache_dir.cc).
  // Reserves `in.charge` bytes for a page of group `in.group`, making room as needed.
  Status Reserve(const Incoming& in) EXCLUDES(mu_);
  // Whether admitting `in` would take its group over its quota, counting the group's writes in
  // flight.
  bool OverQuotaLocked(const Incoming& in) const REQUIRES(mu_);
  // in.charge plus the group's writes in flight.
  uint64_t IncomingGroupBytesLocked(const Incoming& in) const REQUIRES(mu_);
  void UnreserveLocked(const Incoming& in) REQUIRES(mu_);
  // Indexes a written page under `hints`; its reservation `in` becomes its charge. Returns the
  // page's shared object id.
  std::shared_ptr<const std::string> PublishLocked(const Hash128& id, const Incoming& in,
                                                   std::string_view object_id,
                                                   const policy::EntryHints& hints) REQUIRES(mu_);
  // Releases bytes (space_.Release) and wakes writers waiting for room.
  void ReleaseLocked(uint64_t bytes) REQUIRES(mu_);
  // Takes victims from the policy (out of the index) until their charges cover `bytes` and, with
  // `in`, until in's group is no longer over its quota (victims then come from that group),
  // appending them to `victims`. Returns how much of `bytes` is still uncovered (nothing left to
  // evict). During recovery only cold pages are candidates; pinned pages never are.
  uint64_t PickVictimsLocked(uint64_t bytes, const Incoming* in, std::vector<Victim>* victims)
      REQUIRES(mu_);
  // Takes an entry out of the index and tells the policy why. Its bytes stay counted (as
  // freeing, space_account.h) until DropFile unlinks the file. Returns the charge.
  uint64_t EraseLocked(Index::iterator it, policy::RemoveReason reason) REQUIRES(mu_);
  // Unlinks the file of an erased entry, unless a new copy has been published under its name
  // since, and releases the charge. DropFileWithPathLock: the caller holds PathLock(id).
  void DropFile(const Hash128& id, uint64_t charge) EXCLUDES(mu_);
  void DropFileWithPathLock(const Hash128& id, uint64_t charge) EXCLUDES(mu_);
  // Unlinks the victims' files and tells the eviction listener.
  void DropVictims(const std::vector<Victim>& victims) EXCLUDES(mu_);
  // Counts a Remove in the counter of its reason.
  void CountRemovalLocked(RemoveReason reason) REQUIRES(mu_);

  // Reading (cache_dir.cc).
  // Looks for a page not in the index on disk (its sub-folder is not scanned yet) and adopts it.
  // nullopt: the page got indexed meanwhile; use the index. On success `*generation` (if not
  // null) is the generation of the entry the file is indexed under.
  std::optional<StatusOr<std::unique_ptr<FilePageReader>>> Probe(const KeyInfo& key, bool accessed,
                                                                 uint64_t* generation = nullptr)
      EXCLUDES(mu_);
  // Drops a page whose file failed to open or check, if `generation` is still the indexed copy.
  // False if a newer copy replaced it (retry).
  bool DropIfCurrent(const Hash128& id, uint64_t generation, bool corrupt) EXCLUDES(mu_);
  bool SubdirScannedLocked(const Hash128& id) const REQUIRES(mu_);
  // Marks a page used: tells the policy and ends its cold state.
  void TouchLocked(Index::iterator it) REQUIRES(mu_);
  // Keeps an opened page file for later hits if `generation` is still the indexed copy. Returns
  // the file it stopped keeping to make room, if any, for the caller to release after mu_ (its
  // close() is a system call).
  [[nodiscard]] std::shared_ptr<KeptOpen> RememberOpenFileLocked(
      const Hash128& id, uint64_t generation, std::shared_ptr<const FilePageReader> file)
      REQUIRES(mu_);
  // Stops keeping the entry's file (and takes the page out of hits_); returns the file (see
  // RememberOpenFileLocked).
  std::shared_ptr<KeptOpen> ForgetOpenFileLocked(const Hash128& id, Entry& entry) REQUIRES(mu_);
  // Lists a page whose file is kept open in hits_, with its current deadline.
  void ListHitLocked(const Hash128& id, const Entry& entry) REQUIRES(mu_);
  // Tells the policy about hits logged by hits_ (pages no longer indexed are skipped).
  void ApplyAccessesLocked(const std::vector<Hash128>& ids) REQUIRES(mu_);
  void ApplyAccesses(const std::vector<Hash128>& ids) EXCLUDES(mu_);
  // A hit through hits_ alone (no mu_): the page's reader, or null (use the index).
  std::unique_ptr<PageReader> FastHit(const KeyInfo& key, const std::string& path) EXCLUDES(mu_);
  // Whether a kept-open file may serve a hit now (its size on every hit, its name once per
  // kOpenFileRecheckMicros); outside mu_.
  bool StillValid(KeptOpen& kept, const std::string& path) const;

  // Cache rules (cache_dir_rules.cc).
  // True if the page's TTL deadline has passed. Cheap when nothing has expired.
  bool ExpiredLocked(const Hash128& id) const REQUIRES(mu_);
  // Takes up to `max` pages whose deadline is <= `now_us` out of the index (counted as expired)
  // and appends them to `dropped`, for DropVictims.
  void TakeExpiredLocked(int64_t now_us, size_t max, std::vector<Victim>* dropped) REQUIRES(mu_);
  // If the page's deadline has passed, erases it (counted as expired) and returns it, for
  // DropVictims once mu_ is released.
  std::optional<Victim> EraseIfExpiredLocked(Index::iterator it) REQUIRES(mu_);
  // Resolves the pages of `batch` (outside mu_, once per object) and refiles those that still
  // hold the same object under their hints.
  void ApplyResolver(const std::vector<Attributed>& batch) EXCLUDES(mu_);
  // Default hints without an AttributeSource.
  policy::EntryHints Resolve(std::string_view object_id) const;
  uint64_t RulesEpoch() const { return config_.attributes ? config_.attributes->epoch() : 0; }

  // Recovery (cache_dir_recovery.cc).
  // A page file found by the scan, with what its header says.
  struct Found {
    Hash128 id;
    uint64_t charge = 0;
    std::string object_id;  // Empty if the header could not be read or names another page.
    policy::EntryHints hints;
  };
  void RecoveryThread() EXCLUDES(mu_);
  Status ScanSubdir(int subdir) EXCLUDES(mu_);
  // Reads the object ids of `found` from their headers and resolves their hints.
  void AttributeFound(std::vector<Found>* found) EXCLUDES(mu_);
  // Resolves the indexed pages of `found` again (the rules changed during the scan).
  void RefileFound(const std::vector<Found>& found) EXCLUDES(mu_);
  void AddRecoveredLocked(const Found& page) REQUIRES(mu_);
  void FinishRecovery() EXCLUDES(mu_);
  void EvictDownToCapacity() EXCLUDES(mu_);

  const Config config_;
  const DirLayout layout_;
  const uint64_t nonce_;  // Names this instance's temp files.
  std::atomic<uint64_t> temp_sequence_{0};
  const std::unique_ptr<DiskLock> lock_;
  std::array<Mutex, kPathLocks> path_locks_;

  mutable Mutex mu_;
  CondVar room_cv_;  // Bytes released, pages published, scan progress, shutdown.
  uint64_t room_epoch_ GUARDED_BY(mu_) = 0;  // Bumped with every room_cv_ notification.
  Index index_ GUARDED_BY(mu_);
  std::list<Hash128> open_lru_ GUARDED_BY(mu_);  // Entries holding open_file, newest first.
  // The entries holding open_file, for hits without mu_ (see hit_index.h; lock order: mu_, then
  // its shard locks). Its logged accesses are applied to policy_ and open_lru_ in batches.
  HitIndex hits_;
  const std::unique_ptr<policy::PolicyEngine> policy_ PT_GUARDED_BY(mu_);
  ObjectIdInterner object_ids_ GUARDED_BY(mu_);
  // Charges of the writes in flight per group, which count against the group's quota.
  std::unordered_map<uint32_t, uint64_t> group_reserved_ GUARDED_BY(mu_);
  SpaceAccount space_ GUARDED_BY(mu_);  // The byte accounting (space_account.h).
  uint64_t next_generation_ GUARDED_BY(mu_) = 1;
  uint64_t capacity_evictions_ GUARDED_BY(mu_) = 0;
  uint64_t quota_evictions_ GUARDED_BY(mu_) = 0;
  uint64_t expired_pages_ GUARDED_BY(mu_) = 0;
  uint64_t freed_pages_ GUARDED_BY(mu_) = 0;
  uint64_t invalidated_pages_ GUARDED_BY(mu_) = 0;
  uint64_t corrupt_pages_ GUARDED_BY(mu_) = 0;
  uint64_t recovered_pages_ GUARDED_BY(mu_) = 0;
  uint64_t cold_pages_ GUARDED_BY(mu_) = 0;  // Entries with cold set.
  // Pages erased from the index whose file is not unlinked yet (with a count: a page can be
  // republished and erased again meanwhile). Their files must not be adopted by a probe or the
  // scan: they are on their way out, and their bytes are about to be released.
  std::unordered_map<Hash128, int, Hash128Hasher> dropping_ GUARDED_BY(mu_);
  // Pages a Put is renaming into place and has not indexed yet (count per id). The recovery
  // scan must not index such a file as an old copy: PublishLocked would then release the
  // "old" bytes, which are the new file's, and the folder could exceed its capacity.
  std::unordered_map<Hash128, int, Hash128Hasher> publishing_ GUARDED_BY(mu_);

  // Recovery state.
  std::array<ScanState, kSubdirCount> scan_state_ GUARDED_BY(mu_);
  // Pages dropped while their sub-folder's listing may still hold them: the scan must not
  // re-add them from a stale listing.
  std::unordered_set<Hash128, Hash128Hasher> tombstones_ GUARDED_BY(mu_);
  int scanners_running_ GUARDED_BY(mu_) = 0;
  bool sized_for_scan_ GUARDED_BY(mu_) = false;
  bool recovering_ GUARDED_BY(mu_) = true;
  bool stopping_ GUARDED_BY(mu_) = false;
  int64_t scan_start_micros_ = 0;
  // Set by the destructor; read without mu_ by the scan between header reads.
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> next_subdir_{0};
  std::vector<std::thread> scanners_;
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_CACHE_DIR_H_
