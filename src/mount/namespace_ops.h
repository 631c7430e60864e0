// Namespace metadata over one mount's source: what a path is (a file, a directory, nothing) and
// one page of a directory's entries. One implementation for every place that asks the source:
// a client that lists with its own credentials and a worker that lists for its clients.
//
// Directories are not objects in most sources: a key "a/b" makes "a" a directory. A key that is
// both an object and a prefix ("a" and "a/b") shows as the object.
//
// Thread-safety: the functions are thread-safe as far as the mount's under-storage is.
#ifndef CAIRN_MOUNT_NAMESPACE_OPS_H_
#define CAIRN_MOUNT_NAMESPACE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "mount/mount_table.h"

namespace cairn::mount {

struct Entry {
  std::string name;  // One path component (no '/').
  bool is_dir = false;
  uint64_t size = 0;     // Files only.
  std::string version;   // Files only: the source's version (ETag, size-mtime).
  int64_t mtime_ns = 0;  // Files only.
  bool operator==(const Entry&) const = default;
};

struct Listing {
  std::vector<Entry> entries;  // Sorted by name, unique.
  std::string next_token;      // Non-empty when more entries follow: pass it to continue.
};

// What `key` (relative to the mount root, non-empty) is, named `name` in the result: the object,
// else a directory if anything lives under "key/". NotFound if neither; the source's errors
// otherwise (Unavailable, PermissionDenied, ...).
StatusOr<Entry> StatKey(const Mount& mount, const std::string& key, const std::string& name);

// Sorts `entries` by name and keeps the first of equal names (stable: an object listed before a
// folder of the same name wins). Every listing a cache keeps is in this form: lookups in it
// depend on it.
void SortUniqueByName(std::vector<Entry>& entries);

// One page of the directory `key` ("" = the mount root): its files and subdirectories, at most
// `max_entries` (clamped to 1..1000) source entries, continuing from `token`.
StatusOr<Listing> ListDirectory(const Mount& mount, const std::string& key,
                                const std::string& token, int max_entries);

}  // namespace cairn::mount

#endif  // CAIRN_MOUNT_NAMESPACE_OPS_H_
