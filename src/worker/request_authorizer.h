// RequestAuthorizer: whether a connection's identity may make a request, under the cluster's
// current authorization policy (auth/policy.h, mirrored from etcd by the ClusterAgent), and
// the audit trail of what was denied and which admin operations were made.
//
// Identity of a connection (docs/security.md):
//   * a TLS client certificate of the cluster CA names the principal (its common name); a node
//     certificate makes the peer a cluster member, allowed the worker-to-worker requests;
//   * a token in Hello, verified with the cluster's token public keys, replaces it;
//   * otherwise the connection is anonymous.
//
// What each request needs on the page's namespace path (mount + "/" + key):
//   ReadPage, LookupPage, ProbePage: read.  LoadPage, DropPage: admin.
//   StatPath, ListDir: read on the path, or a read grant below it (then only the way down to
//   those grants is shown: auth::Visibility).
//   OpenWrite, RemovePath (and every commit of an open file, again): write on the path, or a
//   cluster member (a worker writes the file a client renamed to the new name's owner:
//   HandOver; the worker the client reached checked the client's grant on both names).
//   PeerRead, CopyFromPeer, ListPending: a cluster member (they make this worker read from or
//   store for a peer, or tell it about files not yet uploaded; grants never allow them).
// A disabled policy allows everything (as before there was one).
//
// Audit: every denial and every admin operation is counted per connection; the first of each
// kind is logged at once ("audit: ..."), and a summary of the rest when the connection closes,
// so a `cairn load` of a million pages writes two lines, not a million.
//
// Thread-safety: RequestAuthorizer is thread-safe. ConnectionAudit belongs to one connection
// and is used by its reader thread only.
#ifndef CAIRN_WORKER_REQUEST_AUTHORIZER_H_
#define CAIRN_WORKER_REQUEST_AUTHORIZER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "auth/policy.h"
#include "auth/token.h"
#include "common/clock.h"
#include "common/thread_annotations.h"
#include "common/status.h"
#include "metrics/registry.h"
#include "net/stream.h"
#include "protocol/wire.h"

namespace cairn::worker {

// The namespace path a request is about, or InvalidArgument for a mount or key that is not a
// plain path (".", ".." or empty segments in the mount, "." or ".." in the key, an absolute
// key): such a request could name one path and read another.
StatusOr<std::string> RequestPath(const protocol::PageRef& page);

// Per-connection audit counts (see the file comment).
class ConnectionAudit {
 public:
  explicit ConnectionAudit(std::string peer) : peer_(std::move(peer)) {}
  ~ConnectionAudit();  // Logs the summary.
  void Denied(const auth::Identity& who, std::string_view op, std::string_view path,
              std::string_view why);
  void AdminOp(const auth::Identity& who, std::string_view op, std::string_view path);

 private:
  struct Tally {
    std::string who;
    uint64_t count = 0;
  };
  const std::string peer_;
  std::map<std::string, Tally> denied_;  // By operation.
  std::map<std::string, Tally> admin_;   // By operation.
};

class RequestAuthorizer {
 public:
  struct Options {
    // The token public keys; none: a client that presents a token is refused (the worker
    // cannot check it).
    std::optional<auth::TokenVerifier> tokens;
    Clock* clock = nullptr;                 // Token expiry. Not owned; null: Clock::Real().
    metrics::Registry* registry = nullptr;  // Denial counters. Not owned; may be null.
  };
  explicit RequestAuthorizer(Options options);

  // Replaces the policy (the ClusterAgent, on every change in etcd).
  void SetPolicy(auth::Policy policy) EXCLUDES(mu_);
  // Until the next SetPolicy, requests are answered Unavailable (a cluster worker that has not
  // read the policy from etcd yet): clients try another worker or the source, as for a worker
  // that is down, rather than failing a read the policy may well allow.
  void AwaitPolicy() EXCLUDES(mu_);
  std::shared_ptr<const auth::PolicyIndex> policy() const EXCLUDES(mu_);

  // The identity the stream's TLS certificate proves (anonymous without one, or for a name
  // that is not a valid principal).
  static auth::Identity IdentityOf(const net::Stream& stream);

  // The identity a Hello token proves. PermissionDenied (the reason is for the client) for a
  // token that does not verify or when this worker has no token keys.
  StatusOr<auth::Identity> IdentityOfToken(const auth::Identity& connection,
                                           std::string_view token);

  // OK, or PermissionDenied naming the missing grant (InvalidArgument for a request whose
  // path is not a plain path; Unavailable while awaiting the policy). Records denials and
  // admin operations in `audit`.
  Status Check(const auth::Identity& who, const protocol::Request& request, ConnectionAudit* audit);

  // What `who` may see at a metadata request's path (StatPath, ListDir: auth::Visibility of the
  // path; everything when the policy is disabled). PermissionDenied when nothing (recorded in
  // `audit`), InvalidArgument for a path that is not normalised, Unavailable while awaiting
  // the policy. Cluster nodes are not clients: under a policy they see only what their grants
  // allow, like anyone.
  StatusOr<auth::Visibility> CheckMetadata(const auth::Identity& who,
                                           const protocol::MetadataRequest& request,
                                           ConnectionAudit* audit);

  // OK when `who` may write `path` (`op` names the operation for the audit: "write", "remove",
  // "commit"): the write grant, which cluster nodes need like anyone. PermissionDenied
  // otherwise (recorded in `audit` when not null), InvalidArgument for a path that is not
  // normalised (whether or not a policy is enabled), Unavailable while awaiting the policy.
  Status CheckWrite(const auth::Identity& who, const std::string& path, std::string_view op,
                    ConnectionAudit* audit);
  // CheckWrite for any access (ReadWritten needs kRead on the file it reads).
  Status CheckAccess(const auth::Identity& who, const std::string& path, auth::Access access,
                     std::string_view op, ConnectionAudit* audit);

 private:
  Clock& clock() const { return options_.clock != nullptr ? *options_.clock : *Clock::Real(); }

  Options options_;
  mutable Mutex mu_;
  std::shared_ptr<const auth::PolicyIndex> policy_ GUARDED_BY(mu_);
  bool awaiting_policy_ GUARDED_BY(mu_) = false;
  metrics::Counter* denied_ = nullptr;
  metrics::Counter* tokens_refused_ = nullptr;
  std::unique_ptr<metrics::Registry> owned_;  // When no registry was given.
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_REQUEST_AUTHORIZER_H_
