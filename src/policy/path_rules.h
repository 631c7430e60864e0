// PathRules: cache-management rules by namespace path prefix (pin, priority, TTL, admission,
// quota), as set with `cairn pin|ttl|priority|admission|quota` and stored in etcd
// (docs/etcd-layout.md, docs/policies.md). Pure code: the worker resolves each page's path to the
// attributes the eviction engine uses.
//
// Resolution: every attribute comes from the most specific rule (longest path prefix, on whole
// path components) that sets it; "/lake/val" governs "/lake/val" and "/lake/val/x", not
// "/lake/validation". Quotas are per mount: a quota rule's path must be a mount path (checked
// by whoever knows the mounts).
//
// Thread-safety: immutable after Create; share it through a shared_ptr<const PathRules>.
#ifndef CAIRN_POLICY_PATH_RULES_H_
#define CAIRN_POLICY_PATH_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "policy/eviction_policy.h"

namespace cairn::policy {

// How pages enter the cache. kLow: cached at low priority (evicted before anything else);
// kBypass: served without being cached (one-pass scans, preprocessing jobs).
enum class Admission : uint8_t { kNormal = 0, kLow = 1, kBypass = 2 };

// Upper bounds of rule values, so every use (deadline = now + ttl, per-worker quota shares) stays
// far from int64/uint64 overflow; larger values are refused by PathRules::Create.
inline constexpr int64_t kMaxRuleTtlMs = int64_t{100} * 365 * 24 * 3600 * 1000;  // ~100 years.
inline constexpr uint64_t kMaxRuleQuotaBytes = uint64_t{1} << 62;                // 4 EiB.

struct PathRule {
  std::string path = {};  // Normalised namespace path ("/lake/val").
  std::optional<bool> pin = {};
  std::optional<Priority> priority = {};
  std::optional<int64_t> ttl_ms = {};  // Pages expire this long after they are cached (0 = never).
  std::optional<Admission> admission = {};
  std::optional<uint64_t> quota_bytes = {};  // Mount paths only: cluster-wide byte cap (0 = none).
};

// The attributes of one path after resolution.
struct ResolvedRule {
  bool pin = false;
  Priority priority = Priority::kNormal;
  // A rule covering the path set its priority, or an admission of kLow: pages written through
  // Cairn enter at low priority unless a rule says otherwise (docs/write-path.md).
  bool priority_set = false;
  int64_t ttl_ms = 0;
  Admission admission = Admission::kNormal;
};

std::string_view PriorityName(Priority p);
StatusOr<Priority> ParsePriority(std::string_view name);  // low | normal | high
std::string_view AdmissionName(Admission a);
StatusOr<Admission> ParseAdmission(std::string_view name);  // normal | low | bypass

class PathRules {
 public:
  PathRules() = default;  // No rules.
  // InvalidArgument for a relative or unnormalised path, a duplicate path, a TTL outside
  // [0, kMaxRuleTtlMs] or a quota above kMaxRuleQuotaBytes.
  static StatusOr<PathRules> Create(std::vector<PathRule> rules);

  // The attributes of `path` (a normalised namespace path).
  ResolvedRule Resolve(std::string_view path) const;

  // The quota of the mount at exactly `mount_path`, 0 if none.
  uint64_t QuotaOf(std::string_view mount_path) const;

  const std::vector<PathRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<PathRule> rules_;  // Sorted by path length, longest first.
};

// Whether `path` is `prefix` or below it, on whole components ("/" covers everything).
bool PathCovers(std::string_view prefix, std::string_view path);

}  // namespace cairn::policy

#endif  // CAIRN_POLICY_PATH_RULES_H_
