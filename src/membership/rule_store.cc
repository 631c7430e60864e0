#include "membership/rule_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "membership/backoff.h"
#include "mount/mount_table.h"

namespace cairn::membership {
namespace {

constexpr int kEditAttempts = 20;

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
  return nlohmann::json{{"version", 1}, {"rules", all}}.dump();
}

StatusOr<std::vector<policy::PathRule>> DecodeRules(std::string_view text) {
  try {
    nlohmann::json doc = nlohmann::json::parse(text);
    if (!doc.is_object() || !doc.contains("rules") || !doc["rules"].is_array()) {
      return InvalidArgumentError("rules document has no \"rules\" array");
    }
    std::vector<policy::PathRule> out;
    for (const nlohmann::json& j : doc["rules"]) {
      policy::PathRule r;
      r.path = j.at("path").get<std::string>();
      if (j.contains("pin")) r.pin = j["pin"].get<bool>();
      if (j.contains("priority")) {
        CAIRN_ASSIGN_OR_RETURN(r.priority, policy::ParsePriority(j["priority"].get<std::string>()));
      }
      if (j.contains("ttl_ms")) r.ttl_ms = j["ttl_ms"].get<int64_t>();
      if (j.contains("admission")) {
        CAIRN_ASSIGN_OR_RETURN(r.admission,
                               policy::ParseAdmission(j["admission"].get<std::string>()));
      }
      if (j.contains("quota_bytes")) r.quota_bytes = j["quota_bytes"].get<uint64_t>();
      out.push_back(std::move(r));
    }
    CAIRN_RETURN_IF_ERROR(policy::PathRules::Create(out).status());
    return out;
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("malformed rules document: ") + e.what());
  }
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
  Backoff backoff(std::chrono::milliseconds(2), std::chrono::milliseconds(1000));
  for (int attempt = 1; attempt <= kEditAttempts; ++attempt) {
    int64_t mod_revision = 0;
    std::vector<policy::PathRule> rules;
    StatusOr<KeyValue> kv = coord_->Get(kRulesKey);
    if (kv.ok()) {
      mod_revision = kv->mod_revision;
      auto decoded = DecodeRules(kv->value);
      if (!decoded.ok()) return CorruptionError("stored rules: " + decoded.status().message());
      rules = std::move(decoded).value();
    } else if (kv.status().code() != StatusCode::kNotFound) {
      return kv.status();
    }
    auto it = std::find_if(rules.begin(), rules.end(),
                           [&](const policy::PathRule& r) { return r.path == path; });
    if (it == rules.end()) {
      rules.push_back(policy::PathRule{.path = path});
      it = rules.end() - 1;
    }
    CAIRN_RETURN_IF_ERROR(edit(&*it));
    if (Empty(*it)) rules.erase(it);
    CAIRN_RETURN_IF_ERROR(policy::PathRules::Create(rules).status());
    StatusOr<int64_t> written = coord_->CompareAndSwap(kRulesKey, mod_revision, EncodeRules(rules));
    if (written.ok()) return Status::Ok();
    if (written.status().code() != StatusCode::kFailedPrecondition) return written.status();
    if (attempt < kEditAttempts) std::this_thread::sleep_for(backoff.Next());
  }
  return FailedPreconditionError("rules: edit still conflicting after " +
                                 std::to_string(kEditAttempts) + " attempts; try again");
}

}  // namespace cairn::membership
