#include "policy/eviction_policy.h"

#include "policy/lru_policy.h"

namespace cairn::policy {

std::vector<std::string_view> EvictionPolicyNames() { return {"lru"}; }

StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name) {
  if (name == "lru") return std::unique_ptr<EvictionPolicy>(std::make_unique<LruPolicy>());
  std::string known;
  for (std::string_view n : EvictionPolicyNames()) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  return InvalidArgumentError("unknown eviction policy '" + std::string(name) +
                              "' (known: " + known + ")");
}

}  // namespace cairn::policy
