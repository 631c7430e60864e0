#include "membership/rule_store.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>

#include "membership/memory_coordination.h"

namespace cairn::membership {
namespace {

TEST(RuleStoreTest, EditsRoundTripAndEmptyRulesDisappear) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  ASSERT_TRUE(store
                  .Edit("/lake/val",
                        [](policy::PathRule* r) {
                          r->pin = true;
                          return Status::Ok();
                        })
                  .ok());
  ASSERT_TRUE(store
                  .Edit("/lake",
                        [](policy::PathRule* r) {
                          r->ttl_ms = 60000;
                          r->priority = policy::Priority::kLow;
                          r->quota_bytes = 1 << 30;
                          r->admission = policy::Admission::kBypass;
                          return Status::Ok();
                        })
                  .ok());
  auto rules = store.List();
  ASSERT_TRUE(rules.ok());
  ASSERT_EQ(rules->size(), 2u);
  auto set = policy::PathRules::Create(*rules);
  ASSERT_TRUE(set.ok());
  policy::ResolvedRule v = set->Resolve("/lake/val/a");
  EXPECT_TRUE(v.pin);
  EXPECT_EQ(v.ttl_ms, 60000);
  EXPECT_EQ(v.priority, policy::Priority::kLow);
  EXPECT_EQ(v.admission, policy::Admission::kBypass);
  EXPECT_EQ(set->QuotaOf("/lake"), 1u << 30);

  ASSERT_TRUE(store
                  .Edit("/lake/val/",
                        [](policy::PathRule* r) {  // Normalised path.
                          r->pin.reset();
                          return Status::Ok();
                        })
                  .ok());
  rules = store.List();
  ASSERT_TRUE(rules.ok());
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ((*rules)[0].path, "/lake");
}

TEST(RuleStoreTest, BadInputIsRefusedAndNothingWritten) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  EXPECT_FALSE(store
                   .Edit("relative",
                         [](policy::PathRule* r) {
                           r->pin = true;
                           return Status::Ok();
                         })
                   .ok());
  EXPECT_FALSE(store
                   .Edit("/a",
                         [](policy::PathRule* r) {
                           r->ttl_ms = -5;
                           return Status::Ok();
                         })
                   .ok());
  EXPECT_EQ(coord.Get(kRulesKey).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(coord.Put(kRulesKey, "{broken").ok());
  EXPECT_EQ(store.List().status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(DecodeRules(R"({"rules":[{"path":"/a","priority":"urgent"}]})").ok());
}

// Expects DecodeRules to refuse `doc` with InvalidArgument whose message names `field`.
void ExpectRefused(const std::string& doc, const std::string& field) {
  StatusOr<std::vector<policy::PathRule>> rules = DecodeRules(doc);
  ASSERT_FALSE(rules.ok()) << doc;
  EXPECT_EQ(rules.status().code(), StatusCode::kInvalidArgument) << doc;
  EXPECT_NE(rules.status().message().find(field), std::string::npos)
      << doc << " -> " << rules.status().ToString();
}

// Found by fuzzing: a double ttl_ms was cast to int64 (undefined behaviour).
TEST(RuleStoreTest, DecodeRefusesNumbersThatAreNotIntegersInRange) {
  ExpectRefused(R"({"rules":[{"path":"/a","ttl_ms":3.6e76}]})", "ttl_ms");
  ExpectRefused(R"({"rules":[{"path":"/a","ttl_ms":1.5}]})", "ttl_ms");
  ExpectRefused(R"({"rules":[{"path":"/a","ttl_ms":-1}]})", "ttl_ms");
  ExpectRefused(R"({"rules":[{"path":"/a","ttl_ms":"60000"}]})", "ttl_ms");
  ExpectRefused(R"({"rules":[{"path":"/a","ttl_ms":18446744073709551615}]})", "ttl_ms");
  ExpectRefused(
      R"({"rules":[{"path":"/a","ttl_ms":)" + std::to_string(policy::kMaxRuleTtlMs + 1) + "}]}",
      "ttl_ms");
  ExpectRefused(R"({"rules":[{"path":"/a","quota_bytes":3.6e76}]})", "quota_bytes");
  ExpectRefused(R"({"rules":[{"path":"/a","quota_bytes":-1}]})", "quota_bytes");
  ExpectRefused(R"({"rules":[{"path":"/a","quota_bytes":"1GiB"}]})", "quota_bytes");
  ExpectRefused(R"({"rules":[{"path":"/a","quota_bytes":true}]})", "quota_bytes");
  ExpectRefused(R"({"rules":[{"path":"/a","quota_bytes":)" +
                    std::to_string(policy::kMaxRuleQuotaBytes + 1) + "}]}",
                "quota_bytes");
}

TEST(RuleStoreTest, DecodeRefusesFieldsOfTheWrongType) {
  ExpectRefused(R"({"rules":[{"path":"/a","pin":"yes"}]})", "pin");
  ExpectRefused(R"({"rules":[{"path":"/a","pin":1}]})", "pin");
  ExpectRefused(R"({"rules":[{"path":"/a","priority":3}]})", "priority");
  ExpectRefused(R"({"rules":[{"path":"/a","admission":null}]})", "admission");
  ExpectRefused(R"({"rules":[{"path":7}]})", "path");
  ExpectRefused(R"({"rules":[{"pin":true}]})", "path");
  ExpectRefused(R"({"rules":[{"path":"/a"},5]})", "rules[1]");
  ExpectRefused(R"({"rules":{"path":"/a"}})", "rules");
  ExpectRefused(R"([1,2])", "not a JSON object");
  ExpectRefused("{\"rules\":[", "not valid JSON");
}

TEST(RuleStoreTest, DecodeAcceptsTheLimitsAndRoundTrips) {
  std::vector<policy::PathRule> rules = {
      {.path = "/a", .ttl_ms = policy::kMaxRuleTtlMs, .quota_bytes = policy::kMaxRuleQuotaBytes},
      {.path = "/b", .pin = false, .ttl_ms = 0}};
  StatusOr<std::vector<policy::PathRule>> back = DecodeRules(EncodeRules(rules));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].ttl_ms, policy::kMaxRuleTtlMs);
  EXPECT_EQ((*back)[0].quota_bytes, policy::kMaxRuleQuotaBytes);
  EXPECT_EQ((*back)[1].pin, false);
  EXPECT_EQ((*back)[1].ttl_ms, 0);
}

TEST(RuleStoreTest, EditRefusesValuesBeyondTheLimitsAndStoredGarbageIsCorruption) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  auto huge_ttl = [](policy::PathRule* r) {
    r->ttl_ms = std::numeric_limits<int64_t>::max();
    return Status::Ok();
  };
  auto huge_quota = [](policy::PathRule* r) {
    r->quota_bytes = std::numeric_limits<uint64_t>::max();
    return Status::Ok();
  };
  auto pin = [](policy::PathRule* r) {
    r->pin = true;
    return Status::Ok();
  };
  EXPECT_EQ(store.Edit("/a", huge_ttl).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Edit("/a", huge_quota).code(), StatusCode::kInvalidArgument);
  // Not UTF-8: EncodeRules could not write it as JSON.
  EXPECT_EQ(store.Edit(std::string("/caf\xe9", 5), pin).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(coord.Get(kRulesKey).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(coord.Put(kRulesKey, R"({"rules":[{"path":"/a","ttl_ms":3.6e76}]})").ok());
  EXPECT_EQ(store.List().status().code(), StatusCode::kCorruption);
  EXPECT_EQ(store.Edit("/b", pin).code(), StatusCode::kCorruption);
}

TEST(RuleStoreTest, ConcurrentEditsAllLand) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        Status s =
            store.Edit("/d" + std::to_string(t) + "/" + std::to_string(i), [](policy::PathRule* r) {
              r->pin = true;
              return Status::Ok();
            });
        EXPECT_TRUE(s.ok()) << s.ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  auto rules = store.List();
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(rules->size(), 80u);
}

}  // namespace
}  // namespace cairn::membership
