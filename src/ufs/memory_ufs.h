// MemoryUnderStorage: an in-memory under-storage with the semantics of the real ones, for fast
// tests of the modules above (page service, client, FUSE) without a disk or a network.
//
// Semantics match LocalUnderStorage: portable keys only (ufs_keys.h), folders are implicit
// (Stat("a") is NotFound when only "a/b" exists), listing pages like S3. MakeDir records an
// empty directory that lists (as a common prefix) and stats like a folder until RemoveDir;
// Rename moves an object in one step, keeping its version; directories are not renamed
// (Unimplemented, as on S3). Every write gives the
// object a new version "m<n>" from a store-wide counter, even when the bytes are unchanged, so
// tests can tell rewrites apart; mtime comes from the injected clock.
//
// Thread-safety: every method, including the test hooks, is safe to call concurrently. Reads copy
// out of an immutable snapshot of the object, so a concurrent overwrite never tears a read.
#ifndef CAIRN_UFS_MEMORY_UFS_H_
#define CAIRN_UFS_MEMORY_UFS_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

class MemoryUnderStorage : public UnderStorage {
 public:
  // `root_uri` is what RootUri() reports (it becomes part of cache keys, so tests that need two
  // distinct stores give distinct URIs). `clock` (not owned, must outlive the store) supplies
  // mtimes; defaults to the real clock.
  explicit MemoryUnderStorage(std::string root_uri = "mem://test", Clock* clock = Clock::Real());

  std::string RootUri() const override { return root_uri_; }
  // NotFound if absent; InvalidArgument for a non-portable key.
  StatusOr<ObjectInfo> Stat(std::string_view key) override EXCLUDES(mu_);
  // As LocalUnderStorage::List; the token is the last item of the previous page.
  StatusOr<ListResult> List(const ListOptions& options) override EXCLUDES(mu_);
  // Copies bytes of the current content; FailedPrecondition on a version mismatch.
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override EXCLUDES(mu_);
  // Parts are kept in memory; Commit checks the condition and stores the object in one step
  // under the store's lock (the exact semantics the real stores approximate). Any part size.
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;
  // NotFound if absent.
  Status Delete(std::string_view key) override EXCLUDES(mu_);
  // One step under the store's lock; the object keeps its version and mtime.
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override EXCLUDES(mu_);
  Status MakeDir(std::string_view key) override EXCLUDES(mu_);
  Status RemoveDir(std::string_view key) override EXCLUDES(mu_);
  // A writer's token ("mem-upload-<n>") names its parts from its first part until its Commit or
  // Abort; AbortUpload discards them (the writer's later calls fail FailedPrecondition).
  Status AbortUpload(std::string_view key, std::string_view token) override EXCLUDES(mu_);

  // --- Test hooks ---

  // The writers that have parts here and have neither committed nor aborted (nor been aborted
  // by AbortUpload): what a dead process would leave behind.
  size_t OpenUploads() const EXCLUDES(mu_);

  // A whole object for string literals; returns the new version, or "" (storing nothing) if the key
  // is not portable.
  std::string Put(std::string_view key, std::string_view data) EXCLUDES(mu_);
  // Current content, or nullopt if absent.
  std::optional<std::string> Get(std::string_view key) const EXCLUDES(mu_);
  // All keys in order.
  std::vector<std::string> Keys() const EXCLUDES(mu_);
  size_t ObjectCount() const EXCLUDES(mu_);
  // Total bytes stored.
  uint64_t TotalBytes() const EXCLUDES(mu_);
  void Clear() EXCLUDES(mu_);

 private:
  class Writer;

  struct Object {
    std::shared_ptr<const std::string> data;
    std::string version;
    int64_t mtime_ns = 0;
  };
  ObjectInfo InfoOf(const std::string& key, const Object& obj) const;
  // Whether anything (an object or a recorded directory) is under "key/".
  bool HasChildren(std::string_view key) const REQUIRES(mu_);
  // Replaces the object under a valid key; returns its new version.
  std::string Store(std::string_view key, std::string_view data) EXCLUDES(mu_);
  // Store() if the object under `key` satisfies `condition`; the errors of ObjectWriter::Commit.
  StatusOr<ObjectInfo> StoreIf(std::string_view key, std::string data,
                               const WriteCondition& condition) EXCLUDES(mu_);

  const std::string root_uri_;
  Clock* const clock_;
  mutable Mutex mu_;
  std::map<std::string, Object, std::less<>> objects_ GUARDED_BY(mu_);
  std::set<std::string, std::less<>> dirs_ GUARDED_BY(mu_);  // From MakeDir, without '/'.
  uint64_t next_version_ GUARDED_BY(mu_) = 1;
  // Uploads by token: their key, and whether AbortUpload discarded them.
  struct Upload {
    std::string key;
    bool aborted = false;
  };
  std::map<std::string, Upload, std::less<>> uploads_ GUARDED_BY(mu_);
  uint64_t next_upload_ GUARDED_BY(mu_) = 1;
  // For the writers: a new token for `key`; whether `token` was aborted; forget `token`.
  std::string BeginUpload(const std::string& key) EXCLUDES(mu_);
  bool UploadAborted(const std::string& token) const EXCLUDES(mu_);
  void EndUpload(const std::string& token) EXCLUDES(mu_);
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_MEMORY_UFS_H_
