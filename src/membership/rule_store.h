// RuleStore: the cluster's cache-management rules (pin, priority, TTL, admission, per-mount
// quota by namespace path), one etcd document at /cairn/v1/rules (docs/etcd-layout.md), edited by
// compare-and-swap like the mount table so concurrent `cairn pin/ttl/...` commands never lose an
// update. Workers mirror the key and apply the rules to new and already-cached pages.
//
// Document (JSON, unknown fields ignored):
//   {"version": 1, "rules": [{"path": "/lake/val", "pin": true, "priority": "high",
//     "ttl_ms": 3600000, "admission": "bypass", "quota_bytes": 1099511627776}]}
// Absent fields are "not set here" (inherited from a shorter prefix, see policy::PathRules).
//
// Thread-safety: thread-safe (no state besides the borrowed Coordination).
#ifndef CAIRN_MEMBERSHIP_RULE_STORE_H_
#define CAIRN_MEMBERSHIP_RULE_STORE_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "membership/coordination.h"
#include "membership/prefix_mirror.h"
#include "policy/path_rules.h"

namespace cairn::membership {

inline constexpr std::string_view kRulesKey = "/cairn/v1/rules";

std::string EncodeRules(const std::vector<policy::PathRule>& rules);
// InvalidArgument (naming the rule and field) for a malformed document: not JSON, a field of the
// wrong type, a number that is not a JSON integer, a ttl_ms outside [0, policy::kMaxRuleTtlMs], a
// quota_bytes above policy::kMaxRuleQuotaBytes, or rules PathRules::Create refuses. Never throws.
StatusOr<std::vector<policy::PathRule>> DecodeRules(std::string_view json);
// The rules in a mirror of kRulesKey (absent = none).
StatusOr<std::vector<policy::PathRule>> ParseRulesSnapshot(const PrefixMirror::Snapshot& snapshot);

class RuleStore {
 public:
  explicit RuleStore(Coordination* coord);  // Borrowed; must outlive the store.

  StatusOr<std::vector<policy::PathRule>> List();

  // Changes the rule of `path` (created if missing): `edit` sets or clears fields. A rule left
  // with no field set is removed. Validates the result (policy::PathRules::Create).
  // Errors: InvalidArgument (also for a path that is not UTF-8: the document is JSON),
  // Unavailable (etcd), FailedPrecondition (still conflicting after
  // many retries), Corruption (the stored document cannot be decoded).
  Status Edit(std::string_view path, const std::function<Status(policy::PathRule*)>& edit);

 private:
  Coordination* coord_;
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_RULE_STORE_H_
