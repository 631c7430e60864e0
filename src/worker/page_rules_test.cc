#include "worker/page_rules.h"

#include <gtest/gtest.h>

#include <limits>

#include "ufs/memory_ufs.h"

namespace cairn::worker {
namespace {

class PageRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MountSpec lake{"/lake", "mem://lake", {}, std::chrono::seconds(1)};
    MountSpec other{"/data/other", "mem://other", {}, std::chrono::seconds(1)};
    auto table = mount::MountTable::CreateWith(
        {lake, other}, {std::make_shared<ufs::MemoryUnderStorage>("mem://lake"),
                        std::make_shared<ufs::MemoryUnderStorage>("mem://other")});
    ASSERT_TRUE(table.ok());
    table_ = *table;
    rules_.SetMounts(table_);
  }
  std::string ObjectId(int mount, const std::string& key) {
    return table_->mounts()[mount]->ObjectId(key);
  }

  FakeClock clock_{1'000'000};
  PageRules rules_{&clock_};
  std::shared_ptr<const mount::MountTable> table_;
};

TEST_F(PageRulesTest, NoRulesGivesTheMountGroupOnly) {
  policy::EntryHints h = rules_.HintsFor(ObjectId(0, "train/a"));
  EXPECT_EQ(h.group, MountGroup("/lake"));
  EXPECT_FALSE(h.pinned);
  EXPECT_EQ(h.expires_at_us, 0);
  EXPECT_NE(MountGroup("/lake"), MountGroup("/data/other"));
  EXPECT_EQ(rules_.HintsFor("mem://unknown/x").group, 0u);
}

TEST_F(PageRulesTest, RulesResolveOnTheNamespacePath) {
  auto rules =
      policy::PathRules::Create({{.path = "/lake/val", .pin = true},
                                 {.path = "/lake", .ttl_ms = 2000},
                                 {.path = "/data/other", .admission = policy::Admission::kLow},
                                 {.path = "/lake/tmp", .admission = policy::Admission::kBypass}});
  ASSERT_TRUE(rules.ok());
  rules_.SetRules(std::make_shared<const policy::PathRules>(*rules));

  policy::EntryHints val = rules_.HintsFor(ObjectId(0, "val/img"));
  EXPECT_TRUE(val.pinned);
  EXPECT_EQ(val.expires_at_us, 1'000'000 + 2'000'000);
  policy::EntryHints train = rules_.HintsFor(ObjectId(0, "train/img"));
  EXPECT_FALSE(train.pinned);
  policy::EntryHints low = rules_.HintsFor(ObjectId(1, "x"));
  EXPECT_EQ(low.priority, policy::Priority::kLow);  // Admission low = low priority.
  EXPECT_EQ(low.group, MountGroup("/data/other"));

  EXPECT_EQ(rules_.AdmissionFor("/lake", "tmp/a"), policy::Admission::kBypass);
  EXPECT_EQ(rules_.AdmissionFor("/lake", "train/a"), policy::Admission::kNormal);
}

TEST_F(PageRulesTest, WrittenPagesAreLowUnlessARuleSetsAPriority) {
  EXPECT_EQ(rules_.WrittenPriority("/lake", "ckpt/a.pt"), policy::Priority::kLow);  // No rules.
  auto rules = policy::PathRules::Create(
      {{.path = "/lake", .ttl_ms = 2000},
       {.path = "/lake/models", .priority = policy::Priority::kHigh},
       {.path = "/lake/models/scratch", .admission = policy::Admission::kLow}});
  ASSERT_TRUE(rules.ok());
  rules_.SetRules(std::make_shared<const policy::PathRules>(*rules));
  EXPECT_EQ(rules_.WrittenPriority("/lake", "ckpt/a.pt"), policy::Priority::kLow);
  EXPECT_EQ(rules_.WrittenPriority("/lake", "models/m.safetensors"), policy::Priority::kHigh);
  EXPECT_EQ(rules_.WrittenPriority("/lake", "models/scratch/t"), policy::Priority::kLow);
  EXPECT_EQ(rules_.WrittenPriority("/lake", "modelsx/m"), policy::Priority::kLow);
}

// now + ttl used to overflow int64 (undefined behaviour) for a long TTL on a late clock.
TEST_F(PageRulesTest, ADeadlinePastInt64Saturates) {
  FakeClock late(std::numeric_limits<int64_t>::max() - 1000);
  PageRules rules(&late);
  rules.SetMounts(table_);
  auto set = policy::PathRules::Create({{.path = "/lake", .ttl_ms = policy::kMaxRuleTtlMs}});
  ASSERT_TRUE(set.ok());
  rules.SetRules(std::make_shared<const policy::PathRules>(*set));
  EXPECT_EQ(rules.HintsFor(ObjectId(0, "a")).expires_at_us, std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace cairn::worker
