#include "policy/path_rules.h"

#include <algorithm>
#include <set>

namespace cairn::policy {

bool PathCovers(std::string_view prefix, std::string_view path) {
  if (prefix == "/") return !path.empty() && path[0] == '/';
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

std::string_view PriorityName(Priority p) {
  switch (p) {
    case Priority::kLow:
      return "low";
    case Priority::kNormal:
      return "normal";
    case Priority::kHigh:
      return "high";
  }
  return "normal";
}

StatusOr<Priority> ParsePriority(std::string_view name) {
  if (name == "low") return Priority::kLow;
  if (name == "normal") return Priority::kNormal;
  if (name == "high") return Priority::kHigh;
  return InvalidArgumentError("priority must be low, normal or high, not '" + std::string(name) +
                              "'");
}

std::string_view AdmissionName(Admission a) {
  switch (a) {
    case Admission::kNormal:
      return "normal";
    case Admission::kLow:
      return "low";
    case Admission::kBypass:
      return "bypass";
  }
  return "normal";
}

StatusOr<Admission> ParseAdmission(std::string_view name) {
  if (name == "normal") return Admission::kNormal;
  if (name == "low") return Admission::kLow;
  if (name == "bypass") return Admission::kBypass;
  return InvalidArgumentError("admission must be normal, low or bypass, not '" + std::string(name) +
                              "'");
}

StatusOr<PathRules> PathRules::Create(std::vector<PathRule> rules) {
  std::set<std::string> seen;
  for (const PathRule& r : rules) {
    if (r.path.empty() || r.path[0] != '/' || (r.path.size() > 1 && r.path.back() == '/') ||
        r.path.find("//") != std::string::npos) {
      return InvalidArgumentError("rule path '" + r.path + "' is not a normalised absolute path");
    }
    if (!seen.insert(r.path).second) {
      return InvalidArgumentError("two rules for " + r.path);
    }
    if (r.ttl_ms && *r.ttl_ms < 0) return InvalidArgumentError("negative TTL for " + r.path);
    if (r.ttl_ms && *r.ttl_ms > kMaxRuleTtlMs) {
      return InvalidArgumentError("TTL of " + r.path + " is above the limit of 100 years");
    }
    if (r.quota_bytes && *r.quota_bytes > kMaxRuleQuotaBytes) {
      return InvalidArgumentError("quota of " + r.path + " is above the limit of 4 EiB");
    }
  }
  PathRules out;
  out.rules_ = std::move(rules);
  std::stable_sort(out.rules_.begin(), out.rules_.end(), [](const PathRule& a, const PathRule& b) {
    return a.path.size() > b.path.size();
  });
  return out;
}

ResolvedRule PathRules::Resolve(std::string_view path) const {
  ResolvedRule out;
  bool pin = false, priority = false, ttl = false, admission = false;
  for (const PathRule& r : rules_) {  // Longest first: the first rule setting a field wins.
    if (!PathCovers(r.path, path)) continue;
    if (!pin && r.pin) {
      out.pin = *r.pin;
      pin = true;
    }
    if (!priority && r.priority) {
      out.priority = *r.priority;
      priority = true;
    }
    if (!ttl && r.ttl_ms) {
      out.ttl_ms = *r.ttl_ms;
      ttl = true;
    }
    if (!admission && r.admission) {
      out.admission = *r.admission;
      admission = true;
    }
  }
  out.priority_set = priority || out.admission == Admission::kLow;
  return out;
}

uint64_t PathRules::QuotaOf(std::string_view mount_path) const {
  for (const PathRule& r : rules_) {
    if (r.path == mount_path && r.quota_bytes) return *r.quota_bytes;
  }
  return 0;
}

}  // namespace cairn::policy
