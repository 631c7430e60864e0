#include "membership/acl_store.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "membership/document_edit.h"
#include "membership/json_fields.h"

namespace cairn::membership {
namespace {

StatusOr<auth::AccessSet> DecodeAccess(const nlohmann::json& grant, const std::string& where) {
  const nlohmann::json* list = JsonMember(grant, "access");
  if (list == nullptr || !list->is_array()) {
    return InvalidArgumentError(where + ": 'access' must be an array of names");
  }
  auth::AccessSet set = 0;
  for (const nlohmann::json& name : *list) {
    if (!name.is_string()) return InvalidArgumentError(where + ": 'access' holds a non-string");
    StatusOr<auth::AccessSet> one = auth::ParseAccessSet(name.get<std::string>());
    if (!one.ok()) return one.status().WithContext(where);
    set |= *one;
  }
  return set;
}

}  // namespace

std::string EncodeAcl(const auth::Policy& policy) {
  nlohmann::json grants = nlohmann::json::array();
  for (const auth::Grant& g : policy.grants) {
    nlohmann::json access = nlohmann::json::array();
    for (auth::Access a : {auth::Access::kRead, auth::Access::kWrite, auth::Access::kAdmin}) {
      if (g.access & static_cast<auth::AccessSet>(a)) access.push_back(auth::AccessName(a));
    }
    grants.push_back({{"principal", g.principal}, {"prefix", g.prefix}, {"access", access}});
  }
  // replace: dump() throws on invalid UTF-8; ValidatePolicy keeps such names out.
  return nlohmann::json{{"version", 1}, {"enabled", policy.enabled}, {"grants", grants}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<auth::Policy> DecodeAcl(std::string_view text) {
  CAIRN_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonObject(text, "acl document"));
  auth::Policy policy;
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> enabled, JsonBool(doc, "enabled", "acl document"));
  if (!enabled) return InvalidArgumentError("acl document has no boolean 'enabled'");
  policy.enabled = *enabled;
  const nlohmann::json* list = JsonMember(doc, "grants");
  if (list == nullptr || !list->is_array()) {
    return InvalidArgumentError("acl document has no \"grants\" array");
  }
  if (list->size() > kMaxGrants) {
    return InvalidArgumentError("acl document has more than " + std::to_string(kMaxGrants) +
                                " grants");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& j = (*list)[i];
    const std::string where = "grants[" + std::to_string(i) + "]";
    if (!j.is_object()) return InvalidArgumentError(where + ": not a JSON object");
    auth::Grant g;
    CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> principal, JsonString(j, "principal", where));
    CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> prefix, JsonString(j, "prefix", where));
    if (!principal || !prefix) return InvalidArgumentError(where + ": needs principal and prefix");
    g.principal = std::move(*principal);
    g.prefix = std::move(*prefix);
    CAIRN_ASSIGN_OR_RETURN(g.access, DecodeAccess(j, where));
    policy.grants.push_back(std::move(g));
  }
  CAIRN_RETURN_IF_ERROR(auth::ValidatePolicy(policy));
  return policy;
}

StatusOr<auth::Policy> ParseAclSnapshot(const PrefixMirror::Snapshot& snapshot) {
  auto it = snapshot.find(std::string(kAclKey));
  if (it == snapshot.end()) return auth::Policy{};
  return DecodeAcl(it->second);
}

AclStore::AclStore(Coordination* coord) : coord_(coord) {}

StatusOr<auth::Policy> AclStore::Get() {
  StatusOr<KeyValue> kv = coord_->Get(kAclKey);
  if (!kv.ok()) {
    if (kv.status().code() == StatusCode::kNotFound) return auth::Policy{};
    return kv.status();
  }
  auto policy = DecodeAcl(kv->value);
  if (!policy.ok()) return CorruptionError("stored acl: " + policy.status().message());
  return policy;
}

Status AclStore::Reset() { return coord_->Put(kAclKey, EncodeAcl(auth::Policy{})).status(); }

Status AclStore::Edit(const std::function<Status(auth::Policy*)>& edit) {
  return EditDocument<auth::Policy>(
      coord_, kAclKey, "acl",
      [](std::string_view stored, auth::Policy* policy) {
        auto decoded = DecodeAcl(stored);
        if (!decoded.ok()) return CorruptionError("stored acl: " + decoded.status().message());
        *policy = std::move(decoded).value();
        return Status::Ok();
      },
      [&](auth::Policy* policy, bool*) {
        CAIRN_RETURN_IF_ERROR(edit(policy));
        CAIRN_RETURN_IF_ERROR(auth::ValidatePolicy(*policy));
        if (policy->grants.size() > kMaxGrants) {
          return InvalidArgumentError("at most " + std::to_string(kMaxGrants) + " grants");
        }
        return Status::Ok();
      },
      EncodeAcl);
}

}  // namespace cairn::membership
