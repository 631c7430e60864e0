// Test helpers shared by the policy module's tests (not part of the library).
#ifndef CAIRN_POLICY_TEST_UTIL_H_
#define CAIRN_POLICY_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "policy/eviction_policy.h"
#include "policy/policy_engine.h"

namespace cairn::policy::testing {

// Readable ids: Id(1), Id(2), ...; the number is the low word.
inline Hash128 Id(uint64_t n) { return Hash128{n * 0x9E3779B97F4A7C15ULL, n}; }

inline std::unique_ptr<PolicyEngine> Engine(std::string_view kind,
                                            const PolicyEngineOptions& options = {}) {
  auto engine = PolicyEngine::Create(kind, options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return std::move(engine).value();
}

// The next victim's number, or 0 if none.
inline uint64_t Victim(EvictionPolicy& p) {
  auto v = p.PickVictim();
  return v ? v->low : 0;
}

// Evicts everything evictable, returning the order (the low word of each id).
inline std::vector<uint64_t> Drain(EvictionPolicy& p) {
  std::vector<uint64_t> out;
  while (auto v = p.PickVictim()) {
    out.push_back(v->low);
    p.OnRemove(*v);
  }
  return out;
}

}  // namespace cairn::policy::testing

#endif  // CAIRN_POLICY_TEST_UTIL_H_
