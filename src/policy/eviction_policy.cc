#include "policy/eviction_policy.h"

#include "policy/policy_engine.h"

namespace cairn::policy {

// EvictionPolicyNames() lives in policy_engine.cc, next to the table of kinds it lists.

StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<PolicyEngine> engine, PolicyEngine::Create(name));
  return std::unique_ptr<EvictionPolicy>(std::move(engine));
}

}  // namespace cairn::policy
