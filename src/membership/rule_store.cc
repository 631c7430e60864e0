#include "membership/rule_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "membership/document_edit.h"
#include "membership/json_fields.h"
#include "membership/records.h"
#include "mount/mount_table.h"

namespace cairn::membership {
namespace {

bool Empty(const policy::PathRule& r) {
  return !r.pin && !r.priority && !r.ttl_ms && !r.admission && !r.quota_bytes;
}

}  // namespace

std::string EncodeRules(const std::vector<policy::PathRule>& rules) {
  nlohmann::json all = nlohmann::json::array();
  for (const policy::PathRule& r : rules) {
    nlohmann::json j = {{"path", r.path}};
    if (r.pin) j["pin"] = *r.pin;
    if (r.priority) j["priority"] = std::string(policy::PriorityName(*r.priority));
    if (r.ttl_ms) j["ttl_ms"] = *r.ttl_ms;
    if (r.admission) j["admission"] = std::string(policy::AdmissionName(*r.admission));
    if (r.quota_bytes) j["quota_bytes"] = *r.quota_bytes;
    all.push_back(std::move(j));
  }
  // replace: dump() throws on invalid UTF-8; Edit refuses such paths before they get here.
  return nlohmann::json{{"version", 1}, {"rules", all}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<std::vector<policy::PathRule>> DecodeRules(std::string_view text) {
  CAIRN_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonObject(text, "rules document"));
  const nlohmann::json* list = JsonMember(doc, "rules");
  if (list == nullptr || !list->is_array()) {
    return InvalidArgumentError("rules document has no \"rules\" array");
  }
  std::vector<policy::PathRule> out;
  out.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& j = (*list)[i];
    const std::string where = "rules[" + std::to_string(i) + "]";
    if (!j.is_object()) return InvalidArgumentError(where + ": not a JSON object");
    policy::PathRule r;
    CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> path, JsonString(j, "path", where));
    if (!path) return InvalidArgumentError(where + ": missing field 'path'");
    r.path = std::move(*path);
    CAIRN_ASSIGN_OR_RETURN(r.pin, JsonBool(j, "pin", where));
    CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> priority, JsonString(j, "priority", where));
    if (priority) {
      StatusOr<policy::Priority> p = policy::ParsePriority(*priority);
      if (!p.ok()) return p.status().WithContext(where);
      r.priority = *p;
    }
    CAIRN_ASSIGN_OR_RETURN(r.ttl_ms, JsonInt64(j, "ttl_ms", where));
    if (r.ttl_ms && (*r.ttl_ms < 0 || *r.ttl_ms > policy::kMaxRuleTtlMs)) {
      return InvalidArgumentError(where + ": 'ttl_ms' must be 0 to " +
                                  std::to_string(policy::kMaxRuleTtlMs) + " (100 years)");
    }
    CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> admission, JsonString(j, "admission", where));
    if (admission) {
      StatusOr<policy::Admission> a = policy::ParseAdmission(*admission);
      if (!a.ok()) return a.status().WithContext(where);
      r.admission = *a;
    }
    CAIRN_ASSIGN_OR_RETURN(r.quota_bytes, JsonUint64(j, "quota_bytes", where));
    if (r.quota_bytes && *r.quota_bytes > policy::kMaxRuleQuotaBytes) {
      return InvalidArgumentError(where + ": 'quota_bytes' must be at most " +
                                  std::to_string(policy::kMaxRuleQuotaBytes) + " (4 EiB)");
    }
    out.push_back(std::move(r));
  }
  CAIRN_RETURN_IF_ERROR(policy::PathRules::Create(out).status());
  return out;
}

StatusOr<std::vector<policy::PathRule>> ParseRulesSnapshot(const PrefixMirror::Snapshot& snapshot) {
  auto it = snapshot.find(std::string(kRulesKey));
  if (it == snapshot.end()) return std::vector<policy::PathRule>();
  return DecodeRules(it->second);
}

RuleStore::RuleStore(Coordination* coord) : coord_(coord) {}

StatusOr<std::vector<policy::PathRule>> RuleStore::List() {
  StatusOr<KeyValue> kv = coord_->Get(kRulesKey);
  if (!kv.ok()) {
    if (kv.status().code() == StatusCode::kNotFound) return std::vector<policy::PathRule>();
    return kv.status();
  }
  auto rules = DecodeRules(kv->value);
  if (!rules.ok()) return CorruptionError("stored rules: " + rules.status().message());
  return rules;
}

Status RuleStore::Edit(std::string_view raw_path,
                       const std::function<Status(policy::PathRule*)>& edit) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  if (!IsValidUtf8(path)) return InvalidArgumentError("rule path must be valid UTF-8");
  using Rules = std::vector<policy::PathRule>;
  return EditDocument<Rules>(
      coord_, kRulesKey, "rules",
      [](std::string_view stored, Rules* rules) {
        auto decoded = DecodeRules(stored);
        if (!decoded.ok()) return CorruptionError("stored rules: " + decoded.status().message());
        *rules = std::move(decoded).value();
        return Status::Ok();
      },
      [&](Rules* rules, bool*) {
        auto it = std::find_if(rules->begin(), rules->end(),
                               [&](const policy::PathRule& r) { return r.path == path; });
        if (it == rules->end()) {
          rules->push_back(policy::PathRule{.path = path});
          it = rules->end() - 1;
        }
        CAIRN_RETURN_IF_ERROR(edit(&*it));
        if (Empty(*it)) rules->erase(it);
        return policy::PathRules::Create(*rules).status();
      },
      EncodeRules);
}

}  // namespace cairn::membership
