// MountStore: reads and edits the cluster's mount table, stored as ONE document under
// kMountTableKey (records.h), so that rules across mounts (unique paths, no nesting) are checked
// and written atomically. Every edit is read -> validate -> CompareAndSwap(key, mod_revision)
// and is retried on a conflict, so concurrent `cairn mount` commands never lose an update.
//
// Stored mounts follow ValidateMountForStore: credentials are never stored in etcd (refer to
// them with profile=NAME or the workers' environment), and replicas is 1..8 (a mount is
// read-only unless its read_only is false: write-through). Add also validates the whole resulting
// table with mount::MountTable::Validate (no source is opened), which opens each under-storage
// locally (no network I/O): a file:// root must exist on the machine that runs the edit, and a
// named profile must be in its AWS config files.
//
// Workers do not use MountStore: they mirror kMountTableKey with a PrefixMirror and read the
// table with ParseMountTableSnapshot.
//
// Thread-safety: thread-safe (no state besides the borrowed Coordination).
#ifndef CAIRN_MEMBERSHIP_MOUNT_STORE_H_
#define CAIRN_MEMBERSHIP_MOUNT_STORE_H_

#include <functional>
#include <string_view>
#include <vector>

#include "cairn/mount_spec.h"
#include "common/status.h"
#include "membership/coordination.h"
#include "membership/document_edit.h"
#include "membership/prefix_mirror.h"

namespace cairn::membership {

inline constexpr int kMaxMountReplicas = 8;
// Compare-and-swap attempts of one edit before it gives up.
inline constexpr int kMountEditAttempts = kDocumentEditAttempts;

// The checks on one mount that need no other mount and no local files: the path is absolute and
// already normalised (mount::NormalizePath(path) == path), the URI is non-empty, no option holds
// a secret (access_key, secret_key, session_token), replicas is 1..8,
// metadata_ttl >= 0, and every string is valid UTF-8. InvalidArgument naming the problem.
Status ValidateMountForStore(const MountSpec& spec);

// The mount table held by a mirror of kMountTableKey: only that exact key counts (a mirror of
// the prefix may also see longer keys); absent = an empty table. InvalidArgument if the document
// cannot be decoded or a mount fails ValidateMountForStore.
StatusOr<std::vector<MountSpec>> ParseMountTableSnapshot(const PrefixMirror::Snapshot& snapshot);

class MountStore {
 public:
  // `coord` is borrowed and must outlive the store.
  explicit MountStore(Coordination* coord);

  // The stored table, in stored order; empty if the key is absent. Unavailable if the store is
  // unreachable; Corruption if the stored document cannot be decoded.
  StatusOr<std::vector<MountSpec>> List();

  // Adds `spec`, its path normalised first. With replace=true an existing mount with the same
  // path is replaced in place (writing nothing if it is identical). Errors:
  //   InvalidArgument  the spec fails ValidateMountForStore (after path normalisation), or the
  //                    resulting table fails mount::MountTable::Validate (nested paths, bad URI or
  //                    option); NotFound if that check finds a file:// root missing locally;
  //   AlreadyExists    the path is mounted and !replace;
  //   Corruption       the stored document cannot be decoded;
  //   Unavailable      the store is unreachable (the write may or may not have happened: List
  //                    to find out);
  //   FailedPrecondition  still conflicting after kMountEditAttempts tries (the table is being
  //                    edited continuously); nothing was written by this call.
  Status Add(const MountSpec& spec, bool replace = false);

  // Removes the mount at `path` (normalised first). NotFound if there is none; InvalidArgument
  // for a malformed path; otherwise the errors of Add. Removing the last mount leaves an empty
  // table document.
  Status Remove(std::string_view path);

 private:
  // Runs `edit` on the current table and writes the result with compare-and-swap, retrying
  // with a growing jittered backoff (2 ms..1 s) on conflicts. `edit` returns an error to abort,
  // or sets *unchanged to skip the write.
  Status Update(const std::function<Status(std::vector<MountSpec>* mounts, bool* unchanged)>& edit);

  Coordination* const coord_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_MOUNT_STORE_H_
