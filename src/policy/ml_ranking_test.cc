// The "ml" policy through PolicyEngine: LRU behaviour, the switch into and out of probation
// insertion per group (exact thresholds), bimodal inserts, promotion, and a small shuffled-epoch
// workload where it must keep a stable resident set.
#include "policy/ml_ranking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <unordered_set>
#include <vector>

#include "policy/test_util.h"

namespace cairn::policy {
namespace {

using internal::MlRanking;
using testing::Drain;
using testing::Engine;
using testing::Id;
using testing::Victim;

constexpr uint32_t kTrain = 1;
constexpr uint32_t kOther = 2;

void InsertRange(PolicyEngine& p, uint64_t first, uint64_t last, uint32_t group) {
  for (uint64_t i = first; i <= last; ++i) p.OnInsert(Id(i), 1, {.group = group});
}

// Evicts `n` victims (whatever PickVictim says), as the page store would.
void Evict(PolicyEngine& p, int n) {
  for (int i = 0; i < n; ++i) {
    auto v = p.PickVictim();
    ASSERT_TRUE(v.has_value());
    p.OnRemove(*v);
  }
}

// Without evictions it is exactly LRU (same trace as LruPolicyTest.FollowsHandComputedTrace).
TEST(MlPolicyTest, BehavesLikeLruWhileNothingThrashes) {
  auto p = Engine("ml");
  EXPECT_EQ(p->name(), "ml");
  InsertRange(*p, 1, 3, kTrain);
  p->OnAccess(Id(1));
  EXPECT_EQ(Victim(*p), 2u);
  p->OnInsert(Id(4), 1, {.group = kTrain});
  p->OnAccess(Id(2));
  p->OnAccess(Id(3));
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{1, 4, 2, 3}));
  EXPECT_FALSE(p->IsThrashing(kTrain));
}

// 256 evictions of which `dead` had no hit: the group thrashes iff dead >= 231 (90 %).
void ExpectThrashingAfter(int dead, bool thrashing) {
  auto p = Engine("ml");
  InsertRange(*p, 1, 256, kTrain);
  for (uint64_t i = 1; i <= static_cast<uint64_t>(256 - dead); ++i) p->OnAccess(Id(i));
  Evict(*p, 255);
  EXPECT_FALSE(p->IsThrashing(kTrain)) << "the window is not full yet";
  Evict(*p, 1);
  EXPECT_EQ(p->IsThrashing(kTrain), thrashing) << dead << " dead of 256";
}
TEST(MlPolicyTest, EntersProbationAtNinetyPercentDeadEvictions) {
  ExpectThrashingAfter(230, false);
  ExpectThrashingAfter(231, true);
  ExpectThrashingAfter(256, true);
}

// Thrashing group 1; trace after the switch (victim end first):
//   1. insert 1001 (probation #1)  -> victim 1001 (inserted at the victim end)
//   2. insert 1002 (probation #2)  -> victim 1002 (newest probation entry goes first)
//   3. access 1001 (promoted)      -> victim 1002
//   4. remove 1002 (evicted)       -> victim: oldest resident, 257
//   5. insert 2001..2029 (#3..#31) -> victim 2029
//   6. insert 2030 (#32: bimodal)  -> victim still 2029; 2030 is at the protected end
//   7. group 2 inserts 3001        -> victim 2029 (other groups insert normally)
//   8. drain: 2029..2001, then the residents 257..300, 1001, 2030, 3001 in LRU order
TEST(MlPolicyTest, ThrashingGroupInsertsOnProbationWithBimodalExceptions) {
  auto p = Engine("ml");
  InsertRange(*p, 1, 300, kTrain);
  Evict(*p, 256);  // 1..256, all dead.
  ASSERT_TRUE(p->IsThrashing(kTrain));
  p->OnInsert(Id(1001), 1, {.group = kTrain});
  EXPECT_EQ(Victim(*p), 1001u);
  p->OnInsert(Id(1002), 1, {.group = kTrain});
  EXPECT_EQ(Victim(*p), 1002u);
  p->OnAccess(Id(1001));
  EXPECT_EQ(Victim(*p), 1002u);
  p->OnRemove(Id(1002));
  EXPECT_EQ(Victim(*p), 257u);
  InsertRange(*p, 2001, 2029, kTrain);
  EXPECT_EQ(Victim(*p), 2029u);
  p->OnInsert(Id(2030), 1, {.group = kTrain});
  EXPECT_EQ(Victim(*p), 2029u);
  p->OnInsert(Id(3001), 1, {.group = kOther});
  EXPECT_EQ(Victim(*p), 2029u);
  EXPECT_FALSE(p->IsThrashing(kOther));

  std::vector<uint64_t> expected;
  for (uint64_t i = 2029; i >= 2001; --i) expected.push_back(i);
  for (uint64_t i = 257; i <= 300; ++i) expected.push_back(i);
  expected.insert(expected.end(), {1001, 2030, 3001});
  EXPECT_EQ(Drain(*p), expected);
}

// Out of probation: 256 evictions with < 128 dead (127 dead: stays; 128 dead... the rule is
// "< 128", so 127 switches back and 128 does not).
void ExpectBackToNormalAfter(int dead, bool normal) {
  auto p = Engine("ml");
  InsertRange(*p, 1, 600, kTrain);
  Evict(*p, 256);  // 1..256 dead: thrashing, window cleared.
  ASSERT_TRUE(p->IsThrashing(kTrain));
  // Entries 257..600 in LRU order; give hits to all but the first `dead` of them.
  for (uint64_t i = 257 + dead; i <= 600; ++i) p->OnAccess(Id(i));
  Evict(*p, 255);
  EXPECT_TRUE(p->IsThrashing(kTrain)) << "the window is not full yet";
  Evict(*p, 1);
  EXPECT_EQ(!p->IsThrashing(kTrain), normal) << dead << " dead of 256";
  // Inserts follow the mode: a probation insert is the next victim, a normal one is not.
  p->OnInsert(Id(5000), 1, {.group = kTrain});
  EXPECT_EQ(Victim(*p) == 5000u, !normal);
}
TEST(MlPolicyTest, LeavesProbationBelowHalfDeadEvictions) {
  ExpectBackToNormalAfter(127, true);
  ExpectBackToNormalAfter(128, false);
}

// Only evictions teach: removals for other reasons and never-used cold entries are not recorded.
TEST(MlPolicyTest, IgnoresDroppedEntriesAndUnusedColdEntries) {
  auto p = Engine("ml");
  InsertRange(*p, 1, 256, kTrain);
  for (uint64_t i = 1; i <= 256; ++i) p->OnRemove(Id(i), RemoveReason::kDropped);
  EXPECT_FALSE(p->IsThrashing(kTrain));
  for (uint64_t i = 1; i <= 256; ++i) p->OnInsert(Id(i), 1, {.cold = true, .group = kTrain});
  Evict(*p, 256);
  EXPECT_FALSE(p->IsThrashing(kTrain));
  // Expired entries are not evictions either.
  for (uint64_t i = 1; i <= 256; ++i) p->OnInsert(Id(i), 1, {.group = kTrain, .expires_at_us = 5});
  EXPECT_EQ(p->TakeExpired(5, 1000).size(), 256u);
  EXPECT_FALSE(p->IsThrashing(kTrain));
}

// A hit ends both the probation and the cold state: a promoted entry moved by Update goes to the
// protected end of its new class, and evictions of cold entries that were used are recorded.
TEST(MlPolicyTest, AHitEndsProbationAndColdness) {
  auto p = Engine("ml");
  InsertRange(*p, 1, 256, kTrain);
  Evict(*p, 256);
  ASSERT_TRUE(p->IsThrashing(kTrain));
  p->OnInsert(Id(500), 1, {.group = kTrain, .priority = Priority::kLow});  // Low class: normal.
  p->OnInsert(Id(501), 1, {.group = kTrain});                              // Probation.
  EXPECT_EQ(Victim(*p), 500u);
  p->OnAccess(Id(501));
  p->Update(Id(501), {.group = kTrain, .priority = Priority::kLow});
  EXPECT_EQ(Victim(*p), 500u) << "501 was promoted: it joins the protected end";
  p->OnRemove(Id(500), RemoveReason::kDropped);
  p->OnRemove(Id(501), RemoveReason::kDropped);
  // 256 cold entries, all used, then evicted: 0 dead of 256 ends probation.
  for (uint64_t i = 1001; i <= 1256; ++i) p->OnInsert(Id(i), 1, {.cold = true, .group = kTrain});
  for (uint64_t i = 1001; i <= 1256; ++i) p->OnAccess(Id(i));
  Evict(*p, 256);
  EXPECT_FALSE(p->IsThrashing(kTrain));
}

// Groups are judged separately: group 2's dead evictions do not put group 1 on probation.
TEST(MlPolicyTest, ThrashingIsPerGroup) {
  auto p = Engine("ml");
  InsertRange(*p, 1, 10, kTrain);
  for (uint64_t i = 1; i <= 10; ++i) p->OnAccess(Id(i));
  InsertRange(*p, 101, 400, kOther);
  // Group 1's entries are the LRU end; evict 256 of group 2's (all dead) through a filter.
  VictimFilter other_only = [](const Hash128& id) { return id.low > 100; };
  for (int i = 0; i < 256; ++i) p->OnRemove(*p->PickVictim(other_only));
  EXPECT_TRUE(p->IsThrashing(kOther));
  EXPECT_FALSE(p->IsThrashing(kTrain));
  p->OnInsert(Id(11), 1, {.group = kTrain});
  p->OnInsert(Id(401), 1, {.group = kOther});
  EXPECT_EQ(Victim(*p), 401u);  // Group 2's probation insert; group 1's went to the MRU end.
}

// Hit ratio of `kind` on epochs 3-4 of a shuffled 4-epoch read of 4,000 pages through 2,000.
double ShuffledHitRatio(std::string_view kind) {
  constexpr uint64_t kPages = 4000;
  constexpr size_t kCache = 2000;
  auto p = Engine(kind);
  std::unordered_set<uint64_t> resident;
  std::vector<uint64_t> order(kPages);
  std::iota(order.begin(), order.end(), 1);
  std::mt19937_64 rng(7);
  uint64_t hits = 0, reads = 0;
  for (int epoch = 1; epoch <= 4; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    for (uint64_t page : order) {
      if (epoch >= 3) ++reads;
      if (resident.count(page)) {
        if (epoch >= 3) ++hits;
        p->OnAccess(Id(page));
        continue;
      }
      while (resident.size() >= kCache) {
        auto v = p->PickVictim();
        p->OnRemove(*v);
        resident.erase(v->low);
      }
      p->OnInsert(Id(page), 1, {.group = kTrain});
      resident.insert(page);
    }
  }
  return static_cast<double>(hits) / static_cast<double>(reads);
}
TEST(MlPolicyTest, KeepsAStableResidentSetUnderShuffledEpochs) {
  const double ideal = 0.5;
  double ml = ShuffledHitRatio("ml");
  double lru = ShuffledHitRatio("lru");
  EXPECT_GE(ml, 0.9 * ideal) << "lru: " << lru;
  EXPECT_GE(ml, 2 * lru);
  EXPECT_LE(ml, ideal + 0.02) << "no policy beats C/D here by much";
}

// Training set (4,000 pages, shuffled every epoch) plus a validation set (200 pages, read after
// each training epoch) through 2,000 pages. The training group thrashes, validation does not, and
// validation stays resident (LRU would evict it every epoch: its reuse distance is 4,200 > 2,000).
// Along the way, each group's quota victim must be its first entry in global victim order.
TEST(MlPolicyTest, OtherDatasetsStillGetInWhileOneThrashes) {
  constexpr uint64_t kTrainPages = 4000, kValPages = 200;
  constexpr size_t kCache = 2000;
  auto p = Engine("ml");
  std::unordered_set<uint64_t> resident;
  std::vector<uint64_t> train(kTrainPages), val(kValPages);
  std::iota(train.begin(), train.end(), 1);
  std::iota(val.begin(), val.end(), 100001);
  std::mt19937_64 rng(11);
  uint64_t train_hits = 0, val_hits = 0, reads = 0;
  auto read = [&](uint64_t page, uint32_t group, int epoch) {
    ++reads;
    if (resident.count(page)) {
      if (epoch >= 3) ++(group == kTrain ? train_hits : val_hits);
      p->OnAccess(Id(page));
      return;
    }
    while (resident.size() >= kCache) {
      auto v = p->PickVictim();
      p->OnRemove(*v);
      resident.erase(v->low);
    }
    p->OnInsert(Id(page), 1, {.group = group});
    resident.insert(page);
    if (reads % 101 != 0) return;
    for (uint32_t g : {kTrain, kOther}) {
      p->SetGroupQuota(g, 1);  // Every insert into g is now over quota.
      VictimFilter in_group = [&](const Hash128& id) { return p->HintsOf(id)->group == g; };
      EXPECT_EQ(p->PickVictimForInsert(g, 2, nullptr), p->PickVictim(in_group)) << reads;
      p->SetGroupQuota(g, 0);
    }
  };
  for (int epoch = 1; epoch <= 4; ++epoch) {
    std::shuffle(train.begin(), train.end(), rng);
    std::shuffle(val.begin(), val.end(), rng);
    for (uint64_t page : train) read(page, kTrain, epoch);
    for (uint64_t page : val) read(page, kOther, epoch);
  }
  EXPECT_TRUE(p->IsThrashing(kTrain));
  EXPECT_FALSE(p->IsThrashing(kOther));
  EXPECT_GE(val_hits, 2 * kValPages * 95 / 100);
  const double train_ideal = static_cast<double>(kCache - kValPages) / kTrainPages;
  EXPECT_GE(static_cast<double>(train_hits) / (2 * kTrainPages), 0.9 * train_ideal);
}

TEST(MlPolicyTest, ConstantsMatchTheDocumentedRule) {
  EXPECT_EQ(MlRanking::kWindow, 256);
  EXPECT_EQ(MlRanking::kEnterDead, 231);  // ceil(0.9 x 256)
  EXPECT_EQ(MlRanking::kExitDead, 128);
  EXPECT_EQ(MlRanking::kBimodalPeriod, 32u);
}

}  // namespace
}  // namespace cairn::policy
