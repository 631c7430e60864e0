#include "worker/request_authorizer.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <variant>

#include "mount/mount_table.h"

namespace cairn::worker {
namespace {

bool PlainSegments(std::string_view path, bool allow_empty) {
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "." || part == ".." || (part.empty() && !allow_empty)) return false;
    i = j + 1;
  }
  return true;
}

struct Need {
  std::string_view op;
  std::optional<auth::Access> access;  // nullopt: cluster members only.
};

Need NeedOf(const protocol::Request& request) {
  struct Visitor {
    Need operator()(const protocol::ReadPageRequest&) { return {"read", auth::Access::kRead}; }
    Need operator()(const protocol::LookupPageRequest&) { return {"lookup", auth::Access::kRead}; }
    Need operator()(const protocol::ProbePageRequest&) { return {"probe", auth::Access::kRead}; }
    Need operator()(const protocol::LoadPageRequest&) { return {"load", auth::Access::kAdmin}; }
    Need operator()(const protocol::DropPageRequest&) { return {"drop", auth::Access::kAdmin}; }
    Need operator()(const protocol::PeerReadRequest&) { return {"peer-read", std::nullopt}; }
    Need operator()(const protocol::CopyFromPeerRequest&) {
      return {"copy-from-peer", std::nullopt};
    }
  };
  return std::visit(Visitor{}, request);
}

}  // namespace

StatusOr<std::string> RequestPath(const protocol::PageRef& page) {
  const std::string& m = page.mount;
  const bool mount_ok = m == "/" || (!m.empty() && m[0] == '/' && m.back() != '/' &&
                                     PlainSegments(std::string_view(m).substr(1), false));
  if (!mount_ok) return InvalidArgumentError("request names a mount that is not a plain path");
  if (page.key.empty() || page.key[0] == '/' || !PlainSegments(page.key, true)) {
    return InvalidArgumentError("request names a key with '.' or '..' segments");
  }
  return m == "/" ? "/" + page.key : m + "/" + page.key;
}

ConnectionAudit::~ConnectionAudit() {
  for (const auto& [op, t] : denied_) {
    if (t.count > 1) {
      spdlog::warn("audit: {} {} request(s) from {} denied in all for {}", t.count, op, peer_,
                   t.who);
    }
  }
  for (const auto& [op, t] : admin_) {
    if (t.count > 1) {
      spdlog::info("audit: {} {} request(s) from {} allowed in all for {}", t.count, op, peer_,
                   t.who);
    }
  }
}

void ConnectionAudit::Denied(const auth::Identity& who, std::string_view op, std::string_view path,
                             std::string_view why) {
  Tally& t = denied_[std::string(op)];
  if (t.count++ == 0) {
    t.who = who.Describe();
    spdlog::warn(
        "audit: denied {} of {} from {}: {} (further denials of {} on this connection "
        "are counted, summed up when it closes)",
        op, path, peer_, why, op);
  }
}

void ConnectionAudit::AdminOp(const auth::Identity& who, std::string_view op,
                              std::string_view path) {
  Tally& t = admin_[std::string(op)];
  if (t.count++ == 0) {
    t.who = who.Describe();
    spdlog::info("audit: {} of {} from {} by {}", op, path, peer_, t.who);
  }
}

RequestAuthorizer::RequestAuthorizer(Options options)
    : options_(std::move(options)),
      policy_(std::make_shared<const auth::PolicyIndex>(auth::Policy{})) {
  metrics::Registry* r = options_.registry;
  if (r == nullptr) {
    owned_ = std::make_unique<metrics::Registry>();
    r = owned_.get();
  }
  denied_ = r->AddCounter("cairn_worker_requests_denied_total",
                          "Requests refused by the authorization policy (docs/security.md)");
  tokens_refused_ = r->AddCounter("cairn_worker_tokens_refused_total",
                                  "Connections whose Hello token did not verify (bad signature, "
                                  "unknown key, expired, or no token keys on this worker)");
}

void RequestAuthorizer::SetPolicy(auth::Policy policy) {
  auto next = std::make_shared<const auth::PolicyIndex>(std::move(policy));
  MutexLock l(&mu_);
  policy_ = std::move(next);
  awaiting_policy_ = false;
}

void RequestAuthorizer::AwaitPolicy() {
  // Deny-all meanwhile, for whoever looks at policy() (no short-circuit folders in Hello).
  auto deny_all =
      std::make_shared<const auth::PolicyIndex>(auth::Policy{.enabled = true, .grants = {}});
  MutexLock l(&mu_);
  policy_ = std::move(deny_all);
  awaiting_policy_ = true;
}

std::shared_ptr<const auth::PolicyIndex> RequestAuthorizer::policy() const {
  MutexLock l(&mu_);
  return policy_;
}

auth::Identity RequestAuthorizer::IdentityOf(const net::Stream& stream) {
  auth::Identity id;
  std::string principal = stream.PeerPrincipal();
  if (principal.empty()) return id;
  if (principal == auth::kAnyPrincipal || !auth::ValidatePrincipal(principal).ok()) {
    spdlog::warn(
        "connection from {}: certificate name is not a valid principal; treated as "
        "anonymous",
        stream.PeerName());
    return id;
  }
  id.source = auth::Identity::Source::kCertificate;
  id.principal = std::move(principal);
  id.cluster_node = stream.PeerIsClusterNode();
  return id;
}

StatusOr<auth::Identity> RequestAuthorizer::IdentityOfToken(const auth::Identity& connection,
                                                            std::string_view token) {
  if (!options_.tokens) {
    tokens_refused_->Increment();
    return PermissionDeniedError(
        "this worker accepts no tokens (it was started without --token-public-key)");
  }
  const int64_t now = clock().WallNanos() / 1'000'000'000;
  StatusOr<auth::TokenClaims> claims = options_.tokens->Verify(token, now);
  if (!claims.ok()) {
    tokens_refused_->Increment();
    return claims.status();
  }
  auth::Identity id;
  id.source = auth::Identity::Source::kToken;
  id.principal = std::move(claims->principal);
  // A token never makes a cluster member; a node that presents one keeps its certificate's role.
  id.cluster_node = connection.cluster_node;
  return id;
}

Status RequestAuthorizer::Check(const auth::Identity& who, const protocol::Request& request,
                                ConnectionAudit* audit) {
  const Need need = NeedOf(request);
  std::shared_ptr<const auth::PolicyIndex> policy;
  bool awaiting = false;
  {
    MutexLock l(&mu_);
    policy = policy_;
    awaiting = awaiting_policy_;
  }
  if (!policy->enabled()) return Status::Ok();
  StatusOr<std::string> path = RequestPath(protocol::BaseOf(request).page);
  if (!path.ok()) {
    denied_->Increment();
    audit->Denied(who, need.op, "(not a plain path)", path.status().message());
    return path.status();
  }
  Status verdict;
  if (who.cluster_node) {
    verdict = Status::Ok();
  } else if (awaiting) {
    // Not a denial: the policy may allow it; the client tries elsewhere.
    return UnavailableError(
        "this worker has not read the authorization policy from etcd yet; try another");
  } else if (!need.access) {
    verdict = PermissionDeniedError(who.Describe() + " is not a cluster node: only workers may " +
                                    std::string(need.op));
  } else {
    verdict = policy->Authorize(who, *path, *need.access);
  }
  if (!verdict.ok()) {
    denied_->Increment();
    audit->Denied(who, need.op, *path, verdict.message());
    return verdict;
  }
  if (need.access == auth::Access::kAdmin) audit->AdminOp(who, need.op, *path);
  return Status::Ok();
}

StatusOr<auth::Visibility> RequestAuthorizer::CheckMetadata(
    const auth::Identity& who, const protocol::MetadataRequest& request, ConnectionAudit* audit) {
  const std::string_view op = std::holds_alternative<protocol::StatPathRequest>(request) ? "stat"
                              : std::holds_alternative<protocol::ListDirRequest>(request)
                                  ? "list"
                                  : "list pending";
  std::shared_ptr<const auth::PolicyIndex> policy;
  bool awaiting = false;
  {
    MutexLock l(&mu_);
    policy = policy_;
    awaiting = awaiting_policy_;
  }
  const std::string& path = protocol::PathOf(request);
  StatusOr<std::string> normal = mount::NormalizePath(path);
  if (!normal.ok() || *normal != path) {
    Status bad = InvalidArgumentError("not a normalised namespace path");
    if (policy->enabled()) {
      denied_->Increment();
      audit->Denied(who, op, "(not a plain path)", bad.message());
    }
    return bad;
  }
  if (!policy->enabled()) return auth::Visibility{true, {}};
  if (std::holds_alternative<protocol::ListPendingRequest>(request)) {
    // Worker to worker: the asking worker shows its client only what that client may see.
    if (who.cluster_node) return auth::Visibility{true, {}};
    Status refused = PermissionDeniedError(who.Describe() +
                                           " is not a cluster node: only workers may list pending "
                                           "files");
    denied_->Increment();
    audit->Denied(who, op, path, refused.message());
    return refused;
  }
  if (awaiting) {
    return UnavailableError(
        "this worker has not read the authorization policy from etcd yet; try another");
  }
  StatusOr<auth::Visibility> visible = policy->VisibleIn(who, path);
  if (!visible.ok()) {
    denied_->Increment();
    audit->Denied(who, op, path, visible.status().message());
  }
  return visible;
}

Status RequestAuthorizer::CheckWrite(const auth::Identity& who, const std::string& path,
                                     std::string_view op, ConnectionAudit* audit) {
  return CheckAccess(who, path, auth::Access::kWrite, op, audit);
}

Status RequestAuthorizer::CheckAccess(const auth::Identity& who, const std::string& path,
                                      auth::Access access, std::string_view op,
                                      ConnectionAudit* audit) {
  std::shared_ptr<const auth::PolicyIndex> policy;
  bool awaiting = false;
  {
    MutexLock l(&mu_);
    policy = policy_;
    awaiting = awaiting_policy_;
  }
  StatusOr<std::string> normal = mount::NormalizePath(path);
  Status verdict;
  if (!normal.ok() || *normal != path) {
    verdict = InvalidArgumentError("not a normalised namespace path");
  } else if (!policy->enabled()) {
    return Status::Ok();
  } else if (who.cluster_node && access == auth::Access::kWrite) {
    // A worker passing on a file its client renamed (HandOver): the worker the client reached
    // checked the client's write grant on both names.
    return Status::Ok();
  } else if (awaiting) {
    return UnavailableError(
        "this worker has not read the authorization policy from etcd yet; try another");
  } else {
    verdict = policy->Authorize(who, path, access);
  }
  if (!verdict.ok() && policy->enabled()) {
    denied_->Increment();
    if (audit != nullptr)
      audit->Denied(who, op, normal.ok() ? path : "(not a plain path)", verdict.message());
  }
  return verdict;
}

}  // namespace cairn::worker
