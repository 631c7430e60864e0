// InodeTable: the inode numbers the FUSE mount hands to the kernel, the namespace path behind
// each, and the kernel's lookup count for each.
//
// The kernel refers to files by inode number only. Every reply that gives the kernel an entry
// (lookup, readdirplus) increments that inode's lookup count by one; FORGET later returns the
// counts, and at zero the kernel no longer knows the number, so the table drops it. Numbers are
// never reused (a 64-bit counter), so a late request for a dropped number cannot hit another
// file, and the generation number can stay 0.
//
// Stability: a path keeps its number while the kernel holds a reference to it. A path that was
// forgotten gets a fresh number on its next lookup. If a path changes type (a file replaced by a
// directory of the same name), the next Ref gives it a fresh number, because the kernel cannot
// change the type of a live inode; the old number stays valid (and resolves to the same path)
// until the kernel forgets it.
//
// Per-inode open state also lives here: the version seen by the last open (the keep_cache
// decision) and the file size last reported to the kernel.
//
// Thread-safety: all methods are thread-safe. One mutex guards the table; every operation is a
// few hash-map steps, far cheaper than the kernel round trip that triggers it, so sharding would
// buy nothing measurable. The mutex is a leaf: no other lock is taken while it is held, and no
// client or kernel call is made under it.
#ifndef CAIRN_FUSE_INODE_TABLE_H_
#define CAIRN_FUSE_INODE_TABLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.h"

namespace cairn::fuse {

class InodeTable {
 public:
  static constexpr uint64_t kRootIno = 1;  // FUSE_ROOT_ID; always "/", never forgotten.

  struct Entry {
    std::string path;
    bool is_dir = false;
  };

  InodeTable();
  InodeTable(const InodeTable&) = delete;
  InodeTable& operator=(const InodeTable&) = delete;

  // Returns the inode number of `path` (absolute, normalized; "/" is the root) and increments
  // its lookup count by one. The caller must hand the number to the kernel or undo with
  // Forget(ino, 1). A new path, or a known path whose type differs from `is_dir`, gets a new
  // number.
  uint64_t Ref(const std::string& path, bool is_dir);

  // Drops `n` lookups from `ino`; at zero the number is forgotten. Forgetting the root is a
  // no-op. An unknown number or an `n` larger than the count is a kernel/bookkeeping mismatch:
  // logged, the entry is dropped, never a crash.
  void Forget(uint64_t ino, uint64_t n);

  // The path and type behind `ino`; nullopt for a number the table does not know.
  std::optional<Entry> Get(uint64_t ino) const;

  // The current number of `path` without touching counts; 0 when the path is not known.
  uint64_t Find(std::string_view path) const;

  // A rename of `from` to `to` succeeded (the kernel moves its entry, and keeps the number): the
  // number of `from`, and of every known path below it, now names the same path under `to`.
  // Numbers `to` and its children had stay valid for the kernel's references (resolving to
  // their old paths) but are no longer found by path.
  void Move(const std::string& from, const std::string& to);

  // Records `version` as the one the latest open of `ino` saw. Returns true when the previous
  // open of the same inode number saw the same version (the kernel's cached pages are still
  // those of this version), false on the first open or after a change. Unknown `ino`: false.
  // Also returns false (once) after TaintCache, and while an invalidation of the inode's pages
  // is in flight (another thread is dropping pages of an older version: this open must not
  // trust the cache either). Each change of version starts a new version epoch (VersionEpoch).
  // `*must_invalidate`: the kernel may hold pages of another version; the caller drops them
  // before it replies, then calls InvalidationDone.
  bool RecordOpenVersion(uint64_t ino, std::string_view version, bool* must_invalidate);

  // Counts the version changes seen by opens of `ino`. A handle opened in an older epoch is
  // pinned to a version the kernel's page cache no longer belongs to: its reads must not reach
  // the kernel (they would put old bytes under the new version). 0 for unknown numbers.
  uint64_t VersionEpoch(uint64_t ino) const;

  // Notes the version a stat (getattr, lookup) reported for `ino`. If an open saw another
  // version before, this is a change: a new epoch starts (handles of the old one get EIO) and
  // the cache is tainted. Returns true on such a change: the caller drops the kernel's pages
  // (before the new size reaches the kernel), then calls InvalidationDone. Unknown `ino` or no
  // open yet: false.
  bool NoteStatVersion(uint64_t ino, std::string_view version);

  // Marks the kernel's cached pages of `ino` as possibly holding another version's bytes: the
  // next open gets keep_cache = 0 whatever the version.
  void TaintCache(uint64_t ino);
  // TaintCache, and an invalidation of the inode's pages is in flight until InvalidationDone:
  // meanwhile no open keeps the cache (it could read pages about to be dropped).
  void BeginInvalidation(uint64_t ino);
  void InvalidationDone(uint64_t ino);

  // Open handles per version epoch. While a handle of an older epoch is open, new handles must
  // bypass the kernel's page cache (direct I/O): pages they cached would be visible to the old
  // handle, whose reader must only ever see its own version.
  void AddHandle(uint64_t ino, uint64_t epoch);
  void RemoveHandle(uint64_t ino, uint64_t epoch);
  bool HasHandlesBefore(uint64_t ino, uint64_t epoch) const;

  // Remembers the file size last reported to the kernel for `ino` (no-op for unknown numbers).
  void RecordReportedSize(uint64_t ino, uint64_t size);
  // The size last reported; nullopt when none was or the number is unknown.
  std::optional<uint64_t> ReportedSize(uint64_t ino) const;

  // The kernel's lookup count of `ino` (0 when unknown); for tests and debugging.
  uint64_t LookupCount(uint64_t ino) const;
  // Number of known inodes, root included.
  size_t size() const;

 private:
  struct Node {
    std::string path;
    bool is_dir = false;
    uint64_t nlookup = 0;
    std::optional<std::string> open_version;
    uint64_t version_epoch = 0;
    bool cache_tainted = false;
    int invalidations = 0;  // Drops of the kernel's pages started and not finished.
    std::map<uint64_t, uint64_t> handles_by_epoch;  // Open handles per epoch (no zero counts).
    std::optional<uint64_t> reported_size;
  };

  mutable Mutex mu_;
  std::unordered_map<uint64_t, Node> by_ino_ GUARDED_BY(mu_);
  // Path -> its current number. An older number of a path that changed type is in by_ino_ only.
  std::unordered_map<std::string, uint64_t> by_path_ GUARDED_BY(mu_);
  uint64_t next_ino_ GUARDED_BY(mu_) = kRootIno + 1;
};

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_INODE_TABLE_H_
