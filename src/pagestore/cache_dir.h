// CacheDir: one cache folder of a PageStore: its in-memory index of pages, its byte accounting,
// its eviction policy and its startup recovery scan. PageStore routes each page to one CacheDir.
//
// Accounting. used_bytes counts, in bytes of disk:
//   - the folder skeleton (root, v1 and its 256 sub-folders: one 4 KiB block each),
//   - every indexed page: its file size rounded up to 4 KiB plus kDirEntryCharge for its name in
//     the sub-folder's directory blocks,
//   - reservations of pages being written (the same charge, taken before the temp file exists),
//   - pages dropped from the index whose file is not unlinked yet.
// Admission keeps used_bytes <= capacity_bytes at all times once the startup scan has finished.
// While it runs, files not scanned yet are unknown, so a Put is admitted only against "credit":
// bytes known to be free (capacity minus what the whole file system uses, at startup) plus bytes
// freed since. Every byte written during recovery is thus matched by a byte known to be free, and
// the folder never grows past the capacity even before its contents are known.
//
// Locking. mu_ guards the index, the policy and the counters; no disk I/O happens under it.
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
#include "pagestore/layout.h"
#include "pagestore/page_file.h"
#include "pagestore/page_store.h"
#include "policy/eviction_policy.h"

namespace cairn::pagestore {

// A PageKey with what is derived from it, computed once per call.
struct KeyInfo {
  explicit KeyInfo(const PageKey& key)
      : serialized(key.Serialize()), page_index(key.page_index), id(Hash128Of(serialized)) {}
  std::string serialized;
  uint64_t page_index;
  Hash128 id;
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
  Status Put(const KeyInfo& key, std::span<const char> data,
             std::span<const uint64_t> checksums) EXCLUDES(mu_);
  Status Remove(const KeyInfo& key, RemoveReason reason) EXCLUDES(mu_);
  bool Contains(const KeyInfo& key) EXCLUDES(mu_);
  PageStoreStats Stats() const EXCLUDES(mu_);

 private:
  static constexpr size_t kPathLocks = 64;
  static constexpr size_t kMaxOpenFiles = 1024;
  enum class ScanState : uint8_t { kPending, kListing, kDone, kFailed };
  struct Entry {
    Entry() = default;
    Entry(uint64_t charge_bytes, uint64_t gen, bool is_cold)
        : charge(charge_bytes), generation(gen), cold(is_cold) {}
    uint64_t charge = 0;
    // Changes whenever a new file is published under the page's name, so a thread that found a
    // bad file can tell whether it is still the indexed one before dropping it.
    uint64_t generation = 0;
    // Found on disk at startup and not used since. While the scan runs, only such pages are
    // evicted: evicting pages written since would trade them for unknown old ones.
    bool cold = false;
    // The page file held open with its parsed header, for recently read pages (at most
    // kMaxOpenFiles per folder): a hit then costs no open() and no header read. Dropped with
    // the entry, so an evicted page's blocks are freed when its last reader finishes.
    std::shared_ptr<const FilePageReader> open_file;
    std::list<Hash128>::iterator open_lru;
  };
  struct Victim {
    Hash128 id;
    uint64_t charge = 0;
  };
  using Index = std::unordered_map<Hash128, Entry, Hash128Hasher>;

  CacheDir(Config config, std::unique_ptr<policy::EvictionPolicy> policy,
           std::unique_ptr<DiskLock> lock, uint64_t initial_credit, uint64_t nonce);

  Mutex& PathLock(const Hash128& id) { return path_locks_[id.low % kPathLocks]; }
  Disk& disk() { return *config_.disk; }

  // Admission (cache_dir.cc).
  Status Reserve(uint64_t charge) EXCLUDES(mu_);
  bool FitsLocked(uint64_t charge) const REQUIRES(mu_);
  uint64_t DeficitLocked(uint64_t charge) const REQUIRES(mu_);
  bool RoomMayComeLocked() const REQUIRES(mu_);
  void PublishLocked(const Hash128& id, uint64_t charge) REQUIRES(mu_);
  void ReleaseLocked(uint64_t bytes) REQUIRES(mu_);
  // Takes victims from the policy (out of the index) until their charges cover `bytes`, appending
  // them to `victims`. Returns how much of `bytes` is still uncovered (nothing left to evict).
  // During recovery only cold pages are candidates.
  uint64_t PickVictimsLocked(uint64_t bytes, std::vector<Victim>* victims) REQUIRES(mu_);
  // Takes an entry out of the index and the policy. Its bytes stay counted (as freeing_) until
  // DropFile unlinks the file. Returns the charge.
  uint64_t EraseLocked(Index::iterator it) REQUIRES(mu_);
  // Unlinks the file of an erased entry, unless a new copy has been published under its name
  // since, and releases the charge. DropFileWithPathLock: the caller holds PathLock(id).
  void DropFile(const Hash128& id, uint64_t charge) EXCLUDES(mu_);
  void DropFileWithPathLock(const Hash128& id, uint64_t charge) EXCLUDES(mu_);
  void DropVictims(const std::vector<Victim>& victims) EXCLUDES(mu_);

  // Reading (cache_dir.cc).
  // Looks for a page not in the index on disk (its sub-folder is not scanned yet) and adopts it.
  // nullopt: the page got indexed meanwhile; use the index.
  std::optional<StatusOr<std::unique_ptr<FilePageReader>>> Probe(const KeyInfo& key, bool accessed)
      EXCLUDES(mu_);
  // Drops a page whose file failed to open or check, if `generation` is still the indexed copy.
  // False if a newer copy replaced it (retry).
  bool DropIfCurrent(const Hash128& id, uint64_t generation, bool corrupt) EXCLUDES(mu_);
  bool SubdirScannedLocked(const Hash128& id) const REQUIRES(mu_);
  // Marks a page used: tells the policy and ends its cold state.
  void TouchLocked(Index::iterator it) REQUIRES(mu_);
  // Keeps an opened page file for later hits if `generation` is still the indexed copy.
  void RememberOpenFileLocked(const Hash128& id, uint64_t generation,
                              std::shared_ptr<const FilePageReader> file) REQUIRES(mu_);
  void ForgetOpenFileLocked(Entry& entry) REQUIRES(mu_);

  // Recovery (cache_dir_recovery.cc).
  void RecoveryThread() EXCLUDES(mu_);
  Status ScanSubdir(int subdir) EXCLUDES(mu_);
  void AddRecoveredLocked(const Hash128& id, uint64_t charge) REQUIRES(mu_);
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
  const std::unique_ptr<policy::EvictionPolicy> policy_ PT_GUARDED_BY(mu_);
  uint64_t used_ GUARDED_BY(mu_) = kSkeletonBytes;
  uint64_t reserved_ GUARDED_BY(mu_) = 0;  // Part of used_: pages being written.
  uint64_t freeing_ GUARDED_BY(mu_) = 0;   // Part of used_: dropped, not unlinked yet.
  uint64_t stuck_ GUARDED_BY(mu_) = 0;     // Part of used_: files whose unlink failed.
  uint64_t next_generation_ GUARDED_BY(mu_) = 1;
  uint64_t evictions_ GUARDED_BY(mu_) = 0;
  uint64_t corrupt_pages_ GUARDED_BY(mu_) = 0;
  uint64_t recovered_pages_ GUARDED_BY(mu_) = 0;
  uint64_t cold_pages_ GUARDED_BY(mu_) = 0;  // Entries with cold set.
  // Pages erased from the index whose file is not unlinked yet (with a count: a page can be
  // republished and erased again meanwhile). Their files must not be adopted by a probe or the
  // scan: they are on their way out, and their bytes are about to be released.
  std::unordered_map<Hash128, int, Hash128Hasher> dropping_ GUARDED_BY(mu_);

  // Recovery state.
  bool exact_ GUARDED_BY(mu_) = false;  // Every sub-folder scanned: used_ is the whole truth.
  uint64_t credit_ GUARDED_BY(mu_);     // Until then: bytes known to be free.
  std::array<ScanState, kSubdirCount> scan_state_ GUARDED_BY(mu_);
  // Pages dropped while their sub-folder's listing may still hold them: the scan must not
  // re-add them from a stale listing.
  std::unordered_set<Hash128, Hash128Hasher> tombstones_ GUARDED_BY(mu_);
  int scanners_running_ GUARDED_BY(mu_) = 0;
  bool sized_for_scan_ GUARDED_BY(mu_) = false;
  bool recovering_ GUARDED_BY(mu_) = true;
  bool stopping_ GUARDED_BY(mu_) = false;
  int64_t scan_start_micros_ = 0;
  std::atomic<int> next_subdir_{0};
  std::vector<std::thread> scanners_;
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_CACHE_DIR_H_
