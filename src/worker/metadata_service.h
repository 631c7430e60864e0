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
//   * Write-back mounts: the files closed and not yet uploaded (PendingFiles) show over the
//     source's answers, with their pending version: a stat of one is its newest pending
//     content, a listing shows it on the page where its name falls, and a folder that holds
//     only pending files is a folder. A file waits at the owner of its own path, a listing is
//     answered by the owner of the folder: in a cluster, listings and stats of folders also ask
//     the other workers (ListPending, PeerPending), so a file closed anywhere shows at once.
//   * ListPending (worker to worker): this worker's own pending files under the folder only.
//
// Errors: InvalidArgument (not a directory; a path that is not normalised), Unavailable (no
// mount of this worker holds the path: the client asks another), NotFound, and the source's.
// No cache: the client keeps what it was answered for the mount's metadata TTL.
//
// Thread-safety: thread-safe; each call may block on the source (run it on a miss thread).
#ifndef CAIRN_WORKER_METADATA_SERVICE_H_
#define CAIRN_WORKER_METADATA_SERVICE_H_

#include <map>
#include <memory>
#include <string>

#include "auth/policy.h"
#include "common/status.h"
#include "mount/namespace_ops.h"
#include "protocol/wire.h"
#include "worker/page_service.h"
#include "worker/peer_pending.h"

namespace cairn::worker {

class MetadataService {
 public:
  // Not owned. In a cluster (pages->options().peers), folders of write-back mounts also show
  // the other workers' pending files (asked within options().peer_timeout, at most 1 s).
  explicit MetadataService(PageService* pages);

  // `wait`: an unknown mount may wait for the table (PageService::ResolvePath).
  StatusOr<protocol::MetadataReply> Serve(const protocol::MetadataRequest& request,
                                          const auth::Visibility& visible, bool wait = true);

 private:
  StatusOr<protocol::MetadataReply> Stat(const protocol::StatPathRequest& request,
                                         const auth::Visibility& visible, bool wait);
  StatusOr<protocol::MetadataReply> List(const protocol::ListDirRequest& request,
                                         const auth::Visibility& visible, bool wait);
  StatusOr<protocol::MetadataReply> ListPending(const protocol::ListPendingRequest& request);
  // The children of folder `dir` that hold pending files, by name: this worker's (`pending`),
  // and the other workers' when `ask_peers`.
  std::map<std::string, mount::Entry> PendingChildren(PendingFiles& pending, const std::string& dir,
                                                      bool ask_peers);

  PageService* const pages_;
  const std::unique_ptr<PeerPending> peer_pending_;  // Null without peers.
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_METADATA_SERVICE_H_
