#include "policy/path_rules.h"

#include <gtest/gtest.h>

#include <limits>

namespace cairn::policy {
namespace {

TEST(PathRulesTest, MostSpecificRuleSettingAFieldWins) {
  PathRule lake{.path = "/lake", .priority = Priority::kLow, .ttl_ms = 60'000};
  PathRule val{.path = "/lake/val", .pin = true, .priority = Priority::kHigh};
  PathRule scratch{.path = "/lake/val/scratch", .pin = false, .admission = Admission::kBypass};
  auto rules = PathRules::Create({lake, val, scratch});
  ASSERT_TRUE(rules.ok());

  ResolvedRule a = rules->Resolve("/lake/train/x");
  EXPECT_FALSE(a.pin);
  EXPECT_EQ(a.priority, Priority::kLow);
  EXPECT_EQ(a.ttl_ms, 60'000);
  EXPECT_EQ(a.admission, Admission::kNormal);

  ResolvedRule b = rules->Resolve("/lake/val/img1");
  EXPECT_TRUE(b.pin);
  EXPECT_EQ(b.priority, Priority::kHigh);
  EXPECT_EQ(b.ttl_ms, 60'000);  // Inherited from /lake.

  ResolvedRule c = rules->Resolve("/lake/val/scratch/t");
  EXPECT_FALSE(c.pin);  // Unpinned explicitly below a pinned folder.
  EXPECT_EQ(c.priority, Priority::kHigh);
  EXPECT_EQ(c.admission, Admission::kBypass);

  // Whole components only.
  ResolvedRule d = rules->Resolve("/lake/validation/x");
  EXPECT_FALSE(d.pin);
  EXPECT_EQ(d.priority, Priority::kLow);
  ResolvedRule e = rules->Resolve("/other/x");
  EXPECT_EQ(e.priority, Priority::kNormal);
  EXPECT_EQ(e.ttl_ms, 0);
}

TEST(PathRulesTest, SaysWhetherARuleSetThePriority) {
  PathRule lake{.path = "/lake", .ttl_ms = 60'000};
  PathRule val{.path = "/lake/val", .priority = Priority::kNormal};
  PathRule scan{.path = "/lake/scan", .admission = Admission::kLow};
  PathRule once{.path = "/lake/once", .admission = Admission::kBypass};
  auto rules = PathRules::Create({lake, val, scan, once});
  ASSERT_TRUE(rules.ok());
  EXPECT_FALSE(rules->Resolve("/lake/train/x").priority_set);  // Only a TTL covers it.
  EXPECT_TRUE(rules->Resolve("/lake/val/x").priority_set);     // Normal, said explicitly.
  EXPECT_TRUE(rules->Resolve("/lake/scan/x").priority_set);    // Low admission.
  EXPECT_FALSE(rules->Resolve("/lake/once/x").priority_set);   // Bypass: no priority at all.
  EXPECT_FALSE(PathRules().Resolve("/lake/x").priority_set);
}

TEST(PathRulesTest, RootRuleCoversEverything) {
  auto rules = PathRules::Create({{.path = "/", .ttl_ms = 5}});
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(rules->Resolve("/a/b").ttl_ms, 5);
}

TEST(PathRulesTest, QuotaIsPerExactMountPath) {
  auto rules = PathRules::Create({{.path = "/lake", .quota_bytes = 100}});
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(rules->QuotaOf("/lake"), 100u);
  EXPECT_EQ(rules->QuotaOf("/lake/x"), 0u);
  EXPECT_EQ(rules->QuotaOf("/other"), 0u);
}

TEST(PathRulesTest, RejectsBadRules) {
  EXPECT_FALSE(PathRules::Create({{.path = "lake"}}).ok());
  EXPECT_FALSE(PathRules::Create({{.path = "/lake/"}}).ok());
  EXPECT_FALSE(PathRules::Create({{.path = "/a//b"}}).ok());
  EXPECT_FALSE(PathRules::Create({{.path = "/a"}, {.path = "/a"}}).ok());
  EXPECT_FALSE(PathRules::Create({{.path = "/a", .ttl_ms = -1}}).ok());
}

TEST(PathRulesTest, RefusesTtlsAndQuotasBeyondTheirLimits) {
  // Beyond the limits a deadline (now + ttl) or a quota share could overflow downstream.
  EXPECT_FALSE(PathRules::Create({{.path = "/a", .ttl_ms = kMaxRuleTtlMs + 1}}).ok());
  EXPECT_FALSE(
      PathRules::Create({{.path = "/a", .ttl_ms = std::numeric_limits<int64_t>::max()}}).ok());
  EXPECT_FALSE(PathRules::Create({{.path = "/a", .quota_bytes = kMaxRuleQuotaBytes + 1}}).ok());
  EXPECT_TRUE(PathRules::Create({{.path = "/a", .ttl_ms = kMaxRuleTtlMs}}).ok());
  EXPECT_TRUE(PathRules::Create({{.path = "/a", .quota_bytes = kMaxRuleQuotaBytes}}).ok());
}

TEST(PathRulesTest, NamesRoundTrip) {
  for (Priority p : {Priority::kLow, Priority::kNormal, Priority::kHigh}) {
    EXPECT_EQ(*ParsePriority(PriorityName(p)), p);
  }
  for (Admission a : {Admission::kNormal, Admission::kLow, Admission::kBypass}) {
    EXPECT_EQ(*ParseAdmission(AdmissionName(a)), a);
  }
  EXPECT_FALSE(ParsePriority("urgent").ok());
  EXPECT_FALSE(ParseAdmission("maybe").ok());
}

}  // namespace
}  // namespace cairn::policy
