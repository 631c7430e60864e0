// MetadataService: answers the metadata requests of protocol v4 (StatPath, ListDir) from the
// mounts' sources with this worker's credentials, so jobs need no source credentials of their
// own, and shows only what the caller may see (an auth::Visibility the RequestAuthorizer
// decided before the request got here):
//   * ListDir: the directory's entries that the visibility shows; a page may come back empty
//     with a next_token (all its entries hidden): the caller continues.
//   * StatPath with read on the path: the source's answer. Without it (the path is on the way
//     down to the caller's grants): a directory, if the source has anything there; never the
//     attributes of an object the caller may not read.
//   * Paths above the mounts are virtual directories (their children: the mounts, filtered).
//   * Write-back mounts: the files closed through this worker and not yet uploaded
//     (PendingFiles) show over the source's answers, with their pending version: a stat of one
//     is its newest pending content, a listing shows it on the page where its name falls, and
//     a folder that holds only pending files is a folder. Files pending on other workers show
//     once uploaded (a listing is answered by the folder's owner, not the files').
//
// Errors: InvalidArgument (not a directory; a path that is not normalised), Unavailable (no
// mount of this worker holds the path: the client asks another), NotFound, and the source's.
// No cache: the client keeps what it was answered for the mount's metadata TTL.
//
// Thread-safety: thread-safe; each call may block on the source (run it on a miss thread).
#ifndef CAIRN_WORKER_METADATA_SERVICE_H_
#define CAIRN_WORKER_METADATA_SERVICE_H_

#include "auth/policy.h"
#include "common/status.h"
#include "protocol/wire.h"
#include "worker/page_service.h"

namespace cairn::worker {

class MetadataService {
 public:
  explicit MetadataService(PageService* pages) : pages_(pages) {}  // Not owned.

  // `wait`: an unknown mount may wait for the table (PageService::ResolvePath).
  StatusOr<protocol::MetadataReply> Serve(const protocol::MetadataRequest& request,
                                          const auth::Visibility& visible, bool wait = true);

 private:
  StatusOr<protocol::MetadataReply> Stat(const protocol::StatPathRequest& request,
                                         const auth::Visibility& visible, bool wait);
  StatusOr<protocol::MetadataReply> List(const protocol::ListDirRequest& request,
                                         const auth::Visibility& visible, bool wait);

  PageService* const pages_;
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_METADATA_SERVICE_H_
