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
// One number per version. An object store replaces an object whole, so a file's number stands
// for one version of it, the way a local file system keeps an unlinked inode alive for the
// descriptors still open on it: when a stat finds another version behind the path, the path
// gets a new number and the old one keeps showing the version (and attributes) the kernel was
// told. The kernel's page cache and file size belong to an inode, and a reader holding the old
// inode copies cached pages up to the inode's size without a lock against a size change (CI
// saw a held descriptor read the old last page's zero-filled tail up to the new size when both
// versions shared a number, 2026-12-04). With a number per version neither ever changes under
// a reader. Opens must match: an open whose version is not the number's gets ESTALE, on which
// the kernel looks the path up again (LOOKUP_REVAL) and opens the new number.
//
// A file this mount writes is the exception: its content is what the kernel is shown being
// written, so its number's version is not fixed while a writer has it open (and after, until a
// stat or open with no other handle open fixes it again).
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

#include "cairn/client.h"
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
  // number. Files given this way have no fixed version (see RefFile).
  uint64_t Ref(const std::string& path, bool is_dir);

  // Ref for a file a stat (lookup, readdirplus) found as `info`. The path keeps its number if
  // the number shows info.version, or if its version is not fixed and no handle has it open
  // (the number then shows `info`), or if `writing` (this mount has the path open for writing:
  // the kernel is shown the writes on that number). Otherwise the path gets a new number
  // showing `info`; the old one lives on for the kernel's references.
  uint64_t RefFile(const std::string& path, const FileInfo& info, bool writing);

  // Ref for a file this mount creates: always a new number (an older one may still be open on
  // a removed file's version), with no fixed version.
  uint64_t RefNewFile(const std::string& path);

  // What getattr of `ino` reports, given that a stat of its path found `current`: `current`,
  // unless the number shows another version, whose attributes it then keeps reporting (the
  // kernel must never see its size change). A number with no fixed version takes `current`'s
  // if no handle has it open. `writing`: as for RefFile (current is reported).
  FileInfo Shown(uint64_t ino, const FileInfo& current, bool writing);

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

  // An open for reading of `ino` pinned to `opened`.
  struct ReaderOpen {
    // The number shows another version: the open must fail with ESTALE (the kernel then
    // looks the path up again and opens the number of the new version). Nothing is counted.
    bool stale = false;
    // The kernel's cached pages of the number may be kept (FOPEN_KEEP_CACHE).
    bool keep_cache = false;
    // The kernel may hold pages that are not this version's (this mount's writes): the caller
    // drops them before it replies, then calls InvalidationDone. Until then no open keeps the
    // cache.
    bool must_invalidate = false;
    // The kernel was told another size than `opened`'s: its attributes must be dropped (after
    // the pages).
    bool size_changed = false;
  };
  // Decides an open for reading and, unless stale, counts the handle (CloseReader undoes).
  // Unknown `ino`: stale.
  ReaderOpen OpenReader(uint64_t ino, const FileInfo& opened);
  void CloseReader(uint64_t ino);
  // A handle open for writing (created, or opened for writing): the number's version is no
  // longer fixed. CloseWriter undoes the count.
  void OpenWriter(uint64_t ino);
  void CloseWriter(uint64_t ino);
  // The path of `ino` was changed without a handle (a truncate by path): as OpenWriter followed
  // by CloseWriter.
  void Unfix(uint64_t ino);
  void InvalidationDone(uint64_t ino);

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
    // Files: the version this number shows and the attributes reported with it; nullopt while
    // the version is not fixed (written here, or given by Ref).
    std::optional<FileInfo> shown;
    int readers = 0;  // Open handles for reading.
    int writers = 0;  // Open handles for writing.
    // The kernel may hold pages of this number that no stat vouched for (written here): the
    // next open drops them.
    bool cache_unverified = false;
    int invalidations = 0;  // Drops of the kernel's pages started and not finished.
    std::optional<uint64_t> reported_size;
  };

  // A new number for `path` (which it now owns) with one lookup.
  uint64_t NewNumber(const std::string& path, bool is_dir) REQUIRES(mu_);
  // Fixes a number with no fixed version to `info` if no handle has it open.
  static bool Adopt(Node* node, const FileInfo& info);

  mutable Mutex mu_;
  std::unordered_map<uint64_t, Node> by_ino_ GUARDED_BY(mu_);
  // Path -> its current number. An older number of a path (another type, an older version) is
  // in by_ino_ only.
  std::unordered_map<std::string, uint64_t> by_path_ GUARDED_BY(mu_);
  uint64_t next_ino_ GUARDED_BY(mu_) = kRootIno + 1;
};

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_INODE_TABLE_H_
