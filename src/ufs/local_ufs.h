// LocalUnderStorage: a POSIX folder as an under-storage ("file:///data/imagenet").
//
// Mapping: key "a/b.bin" is the regular file <root>/a/b.bin. Folders are not objects (Stat of a
// folder is NotFound); they show up as common prefixes "a/" when listing with delimiter "/", and
// every folder is listed, even an empty one (S3 has no empty prefixes; a local tree can).
// Sockets, FIFOs and devices are ignored. Object versions are "<size>-<mtime_ns>", so a rewrite
// that keeps both size and mtime (to the nanosecond) is not detected.
//
// Keys must be portable (ufs_keys.h): "..", ".", empty components, a leading '/' or NUL bytes are
// InvalidArgument. Lookups never leave the root, even through symlinks (see beneath.h).
// Writes go to a hidden temp file ".cairn-tmp.*" in the target folder (parts are pwrite()s at
// their offsets), are fsync'ed and renamed into place, so readers see the old or the new content,
// never a mix; listings skip those names. An exclusive create (WriteCondition::Absent) links the
// temp file to the key, which fails atomically if the key exists; a version condition is checked
// by a stat just before the rename (a writer that bypasses Cairn can slip in between).
//
// Thread-safety: safe for concurrent use; no state beyond the root folder handle.
#ifndef CAIRN_UFS_LOCAL_UFS_H_
#define CAIRN_UFS_LOCAL_UFS_H_

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ufs/beneath.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

// Names starting with this are temp files of in-flight writes; List never returns them.
inline constexpr std::string_view kLocalTempPrefix = ".cairn-tmp.";

class LocalUnderStorage : public UnderStorage {
 public:
  // Opens the folder at absolute `path` ("/data/set", no trailing '/'). NotFound if it does not
  // exist, InvalidArgument if it is not a folder or not absolute. Ownership passes to the caller.
  static StatusOr<std::unique_ptr<LocalUnderStorage>> Open(const std::string& path);

  // "file:///data/set".
  std::string RootUri() const override;

  // NotFound for missing keys, folders and non-regular files; InvalidArgument for bad keys.
  StatusOr<ObjectInfo> Stat(std::string_view key) override;

  // Prefix/delimiter/pagination as in S3 (see ufs_keys.h). The continuation token is the last
  // item of the previous page. Delimiter "/" reads one folder per page; any other delimiter, or
  // none, walks the tree below the prefix in key order, skipping subtrees before the token. A
  // folder reached twice on the same path through symlinks (a loop) is skipped. InvalidArgument
  // for a bad prefix or max_keys < 1; a prefix whose folder does not exist lists as empty.
  StatusOr<ListResult> List(const ListOptions& options) override;

  // pread()s into `out`. With a non-empty expected_version, FailedPrecondition if the file's
  // version differs before or after the read (the second check catches in-place rewrites that
  // happened during the read).
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override;

  // The writer creates missing parent folders and the temp file at its first part (or at
  // Commit), and at Commit fsyncs the file, puts it in place and fsyncs the folder.
  // FailedPrecondition if a parent is a file or the key is a folder; ResourceExhausted when the
  // disk is full. Any part size.
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;

  // unlink()s the file. NotFound if absent or a folder. Empty parent folders are kept.
  Status Delete(std::string_view key) override;

  // rename(2) of a file or a folder (renameat2 RENAME_NOREPLACE for a kAbsent condition), then
  // an fsync of both folders; missing parent folders of `to` are created. A file keeps its
  // version (size and mtime do not change). InvalidArgument when a file would replace a folder,
  // FailedPrecondition when a folder would replace a file or a non-empty folder.
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override;
  // mkdir(2) (mode 0755) and an fsync of the parent; rmdir(2).
  Status MakeDir(std::string_view key) override;
  Status RemoveDir(std::string_view key) override;
  // Removes a dead writer's temp file (its UploadToken: a name with the temp prefix in the
  // key's folder); OK if it is gone.
  Status AbortUpload(std::string_view key, std::string_view token) override;

  // True when symlinks inside the root are followed (openat2 available); see beneath.h.
  bool follows_symlinks() const { return root_->uses_openat2(); }

 private:
  class Writer;

  explicit LocalUnderStorage(std::unique_ptr<RootDir> root) : root_(std::move(root)) {}

  std::unique_ptr<RootDir> root_;
};

// "<size>-<mtime_ns>": the version string of a local file.
std::string LocalVersion(uint64_t size, int64_t mtime_ns);

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_LOCAL_UFS_H_
