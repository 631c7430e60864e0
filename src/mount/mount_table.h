// MountTable: the namespace. Maps "/<mount>/<key>" paths to under-storage objects.
//
// Rules: mount paths are absolute, normalised ("/a/b", no trailing '/', no "." or ".."
// components), unique, and never nested in one another; "/" is allowed only as the single
// mount. Paths above mount points ("/" with mounts "/a" and "/b") are virtual directories.
//
// Thread-safety: immutable after Create; safe to share. (Issue 3 replaces the table on etcd
// watch events by building a new MountTable and swapping a shared_ptr.)
#ifndef CAIRN_MOUNT_MOUNT_TABLE_H_
#define CAIRN_MOUNT_MOUNT_TABLE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/mount_spec.h"
#include "common/status.h"
#include "ufs/ufs.h"
#include "ufs/ufs_limiter.h"

namespace cairn::mount {

struct Mount {
  MountSpec spec;
  std::shared_ptr<ufs::UnderStorage> ufs;
  // Prefix of the page-store object id of every object of this mount: the normalised UFS
  // root URI. Two mounts of the same source share cached pages.
  std::string object_id_prefix;

  std::string ObjectId(std::string_view key) const {
    std::string id = object_id_prefix;
    id += '/';
    id += key;
    return id;
  }
};

struct Resolved {
  const Mount* mount = nullptr;  // Null when the path is a virtual directory above mounts.
  std::string key;               // Key relative to the mount root ("" = the mount root).
};

// Normalises a namespace path: collapses "//", strips a trailing '/', rejects "." and "..",
// NUL bytes and relative paths with InvalidArgument.
StatusOr<std::string> NormalizePath(std::string_view path);

// Builds UfsOptions from a MountSpec's options map; InvalidArgument names an unknown option or
// a bad value.
StatusOr<ufs::UfsOptions> UfsOptionsFromSpec(const MountSpec& spec);

class MountTable {
 public:
  // Validates the specs and opens each mount's under-storage (no network I/O). An empty list is
  // valid (cluster mode before the first mount): "/" is then an empty folder.
  // `shared_limiters` (a worker-wide cap) apply to every mount's source, next to each mount's
  // own max_concurrency / max_bandwidth options.
  // `decorate`, when set, wraps each mount's store once opened (the worker puts its source
  // caches there: src/worker/source_caches.h).
  using StoreDecorator = std::function<std::shared_ptr<ufs::UnderStorage>(
      const MountSpec& spec, std::shared_ptr<ufs::UnderStorage> store)>;
  static StatusOr<std::shared_ptr<const MountTable>> Create(
      std::vector<MountSpec> specs,
      std::vector<std::shared_ptr<ufs::UfsLimiter>> shared_limiters = {},
      const StoreDecorator& decorate = nullptr);
  // Checks what Create checks (paths unique and not nested, URIs parse with a known scheme,
  // options valid) without opening any source: for editing a cluster's table on a machine that
  // cannot reach (or does not have) the sources. InvalidArgument names the problem.
  static Status Validate(const std::vector<MountSpec>& specs);
  // For tests: mounts over existing under-storages (specs[i] uses ufs[i]).
  static StatusOr<std::shared_ptr<const MountTable>> CreateWith(
      std::vector<MountSpec> specs, std::vector<std::shared_ptr<ufs::UnderStorage>> ufs);

  // Resolves a namespace path. NotFound if it is neither under a mount nor above one.
  StatusOr<Resolved> Resolve(std::string_view path) const;

  // The mount with exactly this path (the worker's lookup); NotFound otherwise.
  StatusOr<const Mount*> FindByPath(std::string_view mount_path) const;

  // Names of the immediate children of a virtual directory (e.g. "a", "b" for "/").
  std::vector<std::string> VirtualChildren(std::string_view dir) const;

  const std::vector<std::unique_ptr<Mount>>& mounts() const { return mounts_; }

 private:
  MountTable() = default;
  std::vector<std::unique_ptr<Mount>> mounts_;
};

}  // namespace cairn::mount

#endif  // CAIRN_MOUNT_MOUNT_TABLE_H_
