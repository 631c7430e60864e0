// AclStore: the cluster's authorization policy (auth/policy.h), one etcd document at
// /cairn/v1/acl (docs/etcd-layout.md), edited by compare-and-swap like the rules so concurrent
// `cairn acl` commands never lose an update. Workers mirror the key and check every request
// against the latest policy they decoded.
//
// Document (JSON, unknown fields ignored):
//   {"version": 1, "enabled": true,
//    "grants": [{"principal": "team-a", "prefix": "/lake/a", "access": ["read", "write"]}]}
// No document = authorization disabled (the cluster behaves as before it had a policy).
//
// Who may write this key is etcd's business: give only administrators etcd credentials
// (docs/security.md).
//
// Thread-safety: thread-safe (no state besides the borrowed Coordination).
#ifndef CAIRN_MEMBERSHIP_ACL_STORE_H_
#define CAIRN_MEMBERSHIP_ACL_STORE_H_

#include <functional>
#include <string>
#include <string_view>

#include "auth/policy.h"
#include "common/status.h"
#include "membership/coordination.h"
#include "membership/prefix_mirror.h"

namespace cairn::membership {

inline constexpr std::string_view kAclKey = "/cairn/v1/acl";
// At most this many grants (the document is read by every worker on every change).
inline constexpr size_t kMaxGrants = 10000;

std::string EncodeAcl(const auth::Policy& policy);
// InvalidArgument (naming the grant and field) for a malformed document: not JSON, a field of
// the wrong type, an unknown access name, too many grants, or grants auth::ValidatePolicy
// refuses. Never throws.
StatusOr<auth::Policy> DecodeAcl(std::string_view json);
// The policy in a mirror of kAclKey (absent = disabled, no grants).
StatusOr<auth::Policy> ParseAclSnapshot(const PrefixMirror::Snapshot& snapshot);

class AclStore {
 public:
  explicit AclStore(Coordination* coord);  // Borrowed; must outlive the store.

  // The stored policy (disabled and empty when there is none). Unavailable (etcd), Corruption
  // (the stored document cannot be decoded).
  StatusOr<auth::Policy> Get();

  // Applies `edit` to the stored policy and writes the result if it validates. Errors: those of
  // `edit`, InvalidArgument (the result is not a valid policy), Unavailable, FailedPrecondition
  // (still conflicting after many retries), Corruption.
  Status Edit(const std::function<Status(auth::Policy*)>& edit);

  // Replaces whatever is stored (a document that does not decode, which Edit refuses to touch)
  // with a disabled policy without grants. Unavailable (etcd).
  Status Reset();

 private:
  Coordination* coord_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_ACL_STORE_H_
