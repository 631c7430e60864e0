#include "membership/rule_store.h"

#include <gtest/gtest.h>

#include <thread>

#include "membership/memory_coordination.h"

namespace cairn::membership {
namespace {

TEST(RuleStoreTest, EditsRoundTripAndEmptyRulesDisappear) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  ASSERT_TRUE(store.Edit("/lake/val", [](policy::PathRule* r) {
    r->pin = true;
    return Status::Ok();
  }).ok());
  ASSERT_TRUE(store.Edit("/lake", [](policy::PathRule* r) {
    r->ttl_ms = 60000;
    r->priority = policy::Priority::kLow;
    r->quota_bytes = 1 << 30;
    r->admission = policy::Admission::kBypass;
    return Status::Ok();
  }).ok());
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

  ASSERT_TRUE(store.Edit("/lake/val/", [](policy::PathRule* r) {  // Normalised path.
    r->pin.reset();
    return Status::Ok();
  }).ok());
  rules = store.List();
  ASSERT_TRUE(rules.ok());
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ((*rules)[0].path, "/lake");
}

TEST(RuleStoreTest, BadInputIsRefusedAndNothingWritten) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  EXPECT_FALSE(store.Edit("relative", [](policy::PathRule* r) {
    r->pin = true;
    return Status::Ok();
  }).ok());
  EXPECT_FALSE(store.Edit("/a", [](policy::PathRule* r) {
    r->ttl_ms = -5;
    return Status::Ok();
  }).ok());
  EXPECT_EQ(coord.Get(kRulesKey).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(coord.Put(kRulesKey, "{broken").ok());
  EXPECT_EQ(store.List().status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(DecodeRules(R"({"rules":[{"path":"/a","priority":"urgent"}]})").ok());
}

TEST(RuleStoreTest, ConcurrentEditsAllLand) {
  MemoryCoordination coord;
  RuleStore store(&coord);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        Status s = store.Edit("/d" + std::to_string(t) + "/" + std::to_string(i),
                              [](policy::PathRule* r) {
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
