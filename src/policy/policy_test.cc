#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "policy/eviction_policy.h"
#include "policy/lru_policy.h"

namespace cairn::policy {
namespace {

// Readable ids: Id(1), Id(2), ...
Hash128 Id(uint64_t n) { return Hash128{n * 0x9E3779B97F4A7C15ULL, n}; }

std::unique_ptr<EvictionPolicy> Lru() {
  auto p = MakeEvictionPolicy("lru");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

// Evicts everything, returning the order (the low word of each id).
std::vector<uint64_t> Drain(EvictionPolicy& p) {
  std::vector<uint64_t> out;
  while (auto v = p.PickVictim()) {
    out.push_back(v->low);
    p.OnRemove(*v);
  }
  return out;
}

TEST(MakeEvictionPolicyTest, KnowsLruAndRejectsOthersWithTheKnownNames) {
  auto lru = MakeEvictionPolicy("lru");
  ASSERT_TRUE(lru.ok());
  EXPECT_EQ((*lru)->name(), "lru");
  auto bad = MakeEvictionPolicy("lfu2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("lru"), std::string::npos);
  EXPECT_FALSE(MakeEvictionPolicy("").ok());
  EXPECT_FALSE(MakeEvictionPolicy("LRU ").ok());
}

TEST(LruPolicyTest, EmptyPolicyHasNoVictim) {
  auto p = Lru();
  EXPECT_FALSE(p->PickVictim().has_value());
  EXPECT_EQ(p->size(), 0u);
  p->OnAccess(Id(1));  // Unknown ids are ignored.
  p->OnRemove(Id(1));
  EXPECT_FALSE(p->PickVictim().has_value());
}

// Trace (hand-computed; list shown most recent first):
//   insert 1,2,3            -> 3 2 1      victim 1
//   access 1                -> 1 3 2      victim 2
//   insert 4                -> 4 1 3 2    victim 2
//   access 2, access 3      -> 3 2 4 1    victim 1
//   remove 1                -> 3 2 4      victim 4
//   insert 2 again (update) -> 2 3 4      victim 4
//   drain                   -> 4 3 2
TEST(LruPolicyTest, FollowsHandComputedTrace) {
  auto p = Lru();
  p->Reserve(1000);  // A sizing hint only: changes nothing observable.
  p->OnInsert(Id(1), 10);
  p->OnInsert(Id(2), 20);
  p->OnInsert(Id(3), 30);
  EXPECT_EQ(p->PickVictim(), Id(1));
  EXPECT_EQ(p->PickVictim(), Id(1)) << "PickVictim must not change state";
  p->OnAccess(Id(1));
  EXPECT_EQ(p->PickVictim(), Id(2));
  p->OnInsert(Id(4), 40);
  EXPECT_EQ(p->PickVictim(), Id(2));
  p->OnAccess(Id(2));
  p->OnAccess(Id(3));
  EXPECT_EQ(p->PickVictim(), Id(1));
  p->OnRemove(Id(1));
  EXPECT_EQ(p->PickVictim(), Id(4));
  EXPECT_EQ(p->tracked_bytes(), 90u);
  p->OnInsert(Id(2), 25);
  EXPECT_EQ(p->size(), 3u);
  EXPECT_EQ(p->tracked_bytes(), 95u);
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{4, 3, 2}));
  EXPECT_EQ(p->tracked_bytes(), 0u);
}

// Cold inserts (pages found at startup) go behind everything used in this run:
//   insert 1, cold 2, cold 3 -> 1 2 3 (3 is coldest: the last cold insert)
//   access 3                 -> 3 1 2
//   cold re-insert of 1      -> 3 2 1
TEST(LruPolicyTest, ColdInsertsRankBelowEverythingUsed) {
  auto p = Lru();
  p->OnInsert(Id(1), 1);
  p->OnInsert(Id(2), 1, {.cold = true});
  p->OnInsert(Id(3), 1, {.cold = true});
  EXPECT_EQ(p->PickVictim(), Id(3));
  p->OnAccess(Id(3));
  EXPECT_EQ(p->PickVictim(), Id(2));
  p->OnInsert(Id(1), 1, {.cold = true});
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{1, 2, 3}));
}

// Filter: 1 and 2 are in use. Order (oldest first) 1 2 3 4 -> victim 3; with nothing allowed ->
// none; without filter -> 1.
TEST(LruPolicyTest, FilterSkipsEntriesInUse) {
  auto p = Lru();
  for (uint64_t i = 1; i <= 4; ++i) p->OnInsert(Id(i), 1);
  VictimFilter not_in_use = [](const Hash128& id) { return id.low != 1 && id.low != 2; };
  EXPECT_EQ(p->PickVictim(not_in_use), Id(3));
  EXPECT_FALSE(p->PickVictim([](const Hash128&) { return false; }).has_value());
  EXPECT_EQ(p->PickVictim(), Id(1));
  p->OnRemove(Id(3));
  EXPECT_EQ(p->PickVictim(not_in_use), Id(4));
}

// Randomized cross-check against an obviously correct O(n) model (a logical timestamp per entry;
// the victim is the smallest timestamp). Seeded, so failures reproduce.
TEST(LruPolicyTest, MatchesReferenceModelOnRandomTrace) {
  std::mt19937_64 rng(42);
  auto p = Lru();
  std::map<uint64_t, std::pair<int64_t, uint64_t>> model;  // id -> (stamp, bytes)
  int64_t now = 0;
  int64_t cold = 0;  // Cold inserts get decreasing negative stamps.
  for (int step = 0; step < 20000; ++step) {
    uint64_t id = rng() % 64;
    uint64_t bytes = rng() % 1000;
    switch (rng() % 5) {
      case 0:
      case 1:
        p->OnInsert(Id(id), bytes);
        model[id] = {++now, bytes};
        break;
      case 2:
        p->OnInsert(Id(id), bytes, {.cold = true});
        model[id] = {--cold, bytes};
        break;
      case 3:
        p->OnAccess(Id(id));
        if (model.count(id)) model[id].first = ++now;
        break;
      case 4:
        p->OnRemove(Id(id));
        model.erase(id);
        break;
    }
    ASSERT_EQ(p->size(), model.size());
    uint64_t bytes_sum = 0;
    for (auto& [k, v] : model) bytes_sum += v.second;
    ASSERT_EQ(p->tracked_bytes(), bytes_sum);
    auto victim = p->PickVictim();
    if (model.empty()) {
      ASSERT_FALSE(victim.has_value());
    } else {
      auto oldest = std::min_element(model.begin(), model.end(), [](auto& a, auto& b) {
        return a.second.first < b.second.first;
      });
      ASSERT_TRUE(victim.has_value());
      ASSERT_EQ(victim->low, oldest->first) << "step " << step;
    }
  }
}

// The page store used LruPolicy before MakeEvictionPolicy("lru") returned a PolicyEngine: the two
// must agree on every victim (filtered or not) for the calls the page store makes.
TEST(LruPolicyTest, EngineAgreesWithStandaloneLruPolicy) {
  std::mt19937_64 rng(43);
  auto engine = Lru();
  LruPolicy standalone;
  VictimFilter even = [](const Hash128& id) { return id.low % 2 == 0; };
  for (int step = 0; step < 20000; ++step) {
    uint64_t id = rng() % 64;
    uint64_t bytes = rng() % 1000;
    switch (rng() % 5) {
      case 0:
      case 1:
        engine->OnInsert(Id(id), bytes);
        standalone.OnInsert(Id(id), bytes);
        break;
      case 2:
        engine->OnInsert(Id(id), bytes, {.cold = true});
        standalone.OnInsert(Id(id), bytes, {.cold = true});
        break;
      case 3:
        engine->OnAccess(Id(id));
        standalone.OnAccess(Id(id));
        break;
      case 4:
        engine->OnRemove(Id(id));
        standalone.OnRemove(Id(id));
        break;
    }
    ASSERT_EQ(engine->size(), standalone.size());
    ASSERT_EQ(engine->tracked_bytes(), standalone.tracked_bytes());
    ASSERT_EQ(engine->PickVictim(), standalone.PickVictim()) << "step " << step;
    ASSERT_EQ(engine->PickVictim(even), standalone.PickVictim(even)) << "step " << step;
  }
}

}  // namespace
}  // namespace cairn::policy
