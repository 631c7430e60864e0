// PolicyEngine: factory, priority classes, pinning, TTLs, quotas and Update against hand-computed
// traces, then randomized cross-checks against an obviously correct O(n) model.
#include "policy/policy_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "policy/test_util.h"

namespace cairn::policy {
namespace {

using testing::Drain;
using testing::Engine;
using testing::Id;
using testing::Victim;

constexpr Priority kLow = Priority::kLow;
constexpr Priority kNormal = Priority::kNormal;
constexpr Priority kHigh = Priority::kHigh;

TEST(PolicyEngineTest, EveryPolicyNameBuildsAnEngineOfThatKind) {
  EXPECT_EQ(EvictionPolicyNames(), (std::vector<std::string_view>{"lru", "lfu", "fifo", "ml"}));
  for (std::string_view name : EvictionPolicyNames()) {
    auto p = MakeEvictionPolicy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->name(), name);
    auto* engine = dynamic_cast<PolicyEngine*>(p->get());
    ASSERT_NE(engine, nullptr) << name << ": the page store relies on engine features";
    // Engine features work whatever the kind: a pinned entry is never a victim.
    engine->OnInsert(Id(1), 1, {.pinned = true});
    EXPECT_FALSE(engine->PickVictim().has_value()) << name;
  }
  auto bad = PolicyEngine::Create("arc");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("lru, lfu, fifo, ml"), std::string::npos);
}

// Trace (classes shown victim end first):
//   insert 1 H, 2 N, 3 L, 4 N, 5 L      low: 3 5   normal: 2 4   high: 1
//   access 3                            low: 5 3                      victim 5
//   filter rejects 5 and 3              -> victim 2 (next class)
//   access 2                            normal: 4 2
//   drain                               -> 5 3 4 2 1 (recency never lets 1 go before them)
TEST(PolicyEngineTest, EvictsLowThenNormalThenHighWhateverTheRecency) {
  auto p = Engine("lru");
  p->OnInsert(Id(1), 1, {.priority = kHigh});
  p->OnInsert(Id(2), 1, {.priority = kNormal});
  p->OnInsert(Id(3), 1, {.priority = kLow});
  p->OnInsert(Id(4), 1, {.priority = kNormal});
  p->OnInsert(Id(5), 1, {.priority = kLow});
  EXPECT_EQ(Victim(*p), 3u);
  p->OnAccess(Id(3));
  EXPECT_EQ(Victim(*p), 5u);
  EXPECT_EQ(p->PickVictim([](const Hash128& id) { return id.low != 5 && id.low != 3; }), Id(2));
  p->OnAccess(Id(2));
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{5, 3, 4, 2, 1}));
}

TEST(PolicyEngineTest, OutOfRangePriorityIsTreatedAsHigh) {
  auto p = Engine("lru");
  p->OnInsert(Id(1), 1, {.priority = static_cast<Priority>(7)});
  p->OnInsert(Id(2), 1, {.priority = kNormal});
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{2, 1}));
  p->OnInsert(Id(3), 1, {.priority = static_cast<Priority>(200)});
  EXPECT_EQ(p->HintsOf(Id(3))->priority, kHigh);
}

// Pinned entries are never victims and the filter is never even asked about them.
TEST(PolicyEngineTest, PinnedEntriesAreNeverVictimsAndCostTheFilterNothing) {
  auto p = Engine("lfu");
  for (uint64_t i = 1; i <= 1000; ++i) p->OnInsert(Id(i), 10, {.pinned = true});
  p->OnInsert(Id(2000), 7);
  EXPECT_EQ(p->size(), 1001u);
  EXPECT_EQ(p->tracked_bytes(), 10007u);
  EXPECT_EQ(p->pinned_bytes(), 10000u);
  EXPECT_EQ(p->pinned_count(), 1000u);
  int asked = 0;
  VictimFilter count = [&asked](const Hash128&) {
    ++asked;
    return true;
  };
  EXPECT_EQ(p->PickVictim(count), Id(2000));
  EXPECT_EQ(asked, 1);
  p->OnAccess(Id(5));  // No effect on a pinned entry.
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{2000}));
  EXPECT_EQ(p->size(), 1000u);
  // Unpinning makes it evictable; removing a pinned entry releases its bytes.
  p->Update(Id(1), {});
  EXPECT_EQ(Victim(*p), 1u);
  EXPECT_EQ(p->pinned_bytes(), 9990u);
  p->OnRemove(Id(2), RemoveReason::kDropped);
  EXPECT_EQ(p->pinned_bytes(), 9980u);
  EXPECT_EQ(p->pinned_count(), 998u);
  // A re-insert follows the new hints: pinned again.
  p->OnInsert(Id(1), 10, {.pinned = true});
  EXPECT_FALSE(p->PickVictim().has_value());
}

// Deadlines: 1@30, 2@10, 3@20, 4 none, 5@20 pinned, 6@10.
//   TakeExpired(9)        -> none
//   TakeExpired(20, max 3)-> 2, 6 (both @10: ties by id high word), then 3 or 5 @20: the smaller id
//   TakeExpired(20)       -> the other @20
//   Update 1 to @15, TakeExpired(15) -> 1;  4 never expires.
TEST(PolicyEngineTest, TakeExpiredReturnsPassedDeadlinesEarliestFirst) {
  auto p = Engine("lru");
  p->OnInsert(Id(1), 1, {.expires_at_us = 30});
  p->OnInsert(Id(2), 1, {.expires_at_us = 10});
  p->OnInsert(Id(3), 1, {.expires_at_us = 20});
  p->OnInsert(Id(4), 1);
  p->OnInsert(Id(5), 1, {.pinned = true, .expires_at_us = 20});
  p->OnInsert(Id(6), 1, {.expires_at_us = 10});
  EXPECT_EQ(p->NextExpiry(), 10);
  EXPECT_TRUE(p->TakeExpired(9, 100).empty());
  EXPECT_TRUE(p->TakeExpired(100, 0).empty());

  auto by_high = [](uint64_t a, uint64_t b) { return Id(a).high < Id(b).high; };
  std::vector<uint64_t> at10 = {2, 6}, at20 = {3, 5};
  std::sort(at10.begin(), at10.end(), by_high);
  std::sort(at20.begin(), at20.end(), by_high);
  std::vector<Hash128> first = p->TakeExpired(20, 3);
  EXPECT_EQ(first, (std::vector<Hash128>{Id(at10[0]), Id(at10[1]), Id(at20[0])}));
  EXPECT_EQ(p->TakeExpired(20, 100), (std::vector<Hash128>{Id(at20[1])}));
  EXPECT_EQ(p->size(), 2u);
  EXPECT_EQ(p->pinned_count(), 0u) << "5 was pinned and expired";
  EXPECT_EQ(p->NextExpiry(), 30);
  p->Update(Id(1), {.expires_at_us = 15});
  EXPECT_EQ(p->NextExpiry(), 15);
  EXPECT_EQ(p->TakeExpired(15, 100), (std::vector<Hash128>{Id(1)}));
  EXPECT_FALSE(p->NextExpiry().has_value());
  EXPECT_TRUE(p->TakeExpired(std::numeric_limits<int64_t>::max(), 100).empty());
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{4}));
  // Removing an entry removes its deadline too.
  p->OnInsert(Id(7), 1, {.expires_at_us = 5});
  p->OnRemove(Id(7));
  EXPECT_FALSE(p->NextExpiry().has_value());
}

// Group 1 has a quota of 100 bytes. LRU order: c(g2, 10) a(g1, 40) b(g1, 40) d(g1, 15, high).
//   insert 30 into g1: 95 + 30 > 100 -> victim from g1: a (c is older but belongs to g2)
//   insert  5 into g1: 95 +  5 <= 100 -> no quota pressure: global victim c
//   insert 30 into g2 (no quota)      -> c
//   remove a; insert 30 into g1: 55 + 30 <= 100 -> c
//   insert 50 into g1: 55 + 50 > 100 -> b (normal class before d's high class)
//   filter rejects b                  -> d
//   remove b: only d (15) left in g1; insert 90: 105 > 100 -> d; d pinned -> none
TEST(PolicyEngineTest, QuotaTakesTheVictimFromTheInsertingGroup) {
  auto p = Engine("lru");
  p->SetGroupQuota(1, 100);
  EXPECT_EQ(p->group_quota(1), 100u);
  p->OnInsert(Id(3), 10, {.group = 2});
  p->OnInsert(Id(1), 40, {.group = 1});
  p->OnInsert(Id(2), 40, {.group = 1});
  p->OnInsert(Id(4), 15, {.group = 1, .priority = kHigh});
  EXPECT_EQ(p->group_bytes(1), 95u);
  EXPECT_EQ(p->group_bytes(2), 10u);
  EXPECT_TRUE(p->OverQuota(1, 30));
  EXPECT_FALSE(p->OverQuota(1, 5));
  EXPECT_FALSE(p->OverQuota(2, 1u << 30));
  EXPECT_EQ(p->PickVictimForInsert(1, 30), Id(1));
  EXPECT_EQ(p->PickVictimForInsert(1, 5), Id(3));
  EXPECT_EQ(p->PickVictimForInsert(2, 30), Id(3));
  p->OnRemove(Id(1));
  EXPECT_EQ(p->PickVictimForInsert(1, 30), Id(3));
  EXPECT_EQ(p->PickVictimForInsert(1, 50), Id(2));
  VictimFilter not_b = [](const Hash128& id) { return id.low != 2; };
  EXPECT_EQ(p->PickVictimForInsert(1, 50, &not_b), Id(4));
  p->OnRemove(Id(2));
  EXPECT_EQ(p->PickVictimForInsert(1, 90), Id(4));
  p->Update(Id(4), {.group = 1, .pinned = true});
  EXPECT_FALSE(p->PickVictimForInsert(1, 90).has_value()) << "only pinned bytes over quota";
  EXPECT_EQ(p->PickVictimForInsert(1, 85), Id(3)) << "15 + 85 fits exactly";
  // Quota 0 removes it; overflow-safe arithmetic near the top of the range.
  p->SetGroupQuota(1, 0);
  EXPECT_EQ(p->group_quota(1), 0u);
  EXPECT_EQ(p->PickVictimForInsert(1, 90), Id(3));
  p->SetGroupQuota(1, std::numeric_limits<uint64_t>::max() - 5);
  EXPECT_FALSE(p->OverQuota(1, std::numeric_limits<uint64_t>::max() - 20));
  EXPECT_TRUE(p->OverQuota(1, std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(p->group_bytes(7), 0u);
}

// Update re-files an entry, keeping its size:
//   insert 1,2,3 (g0, normal, 10 bytes each)            victim 1
//   Update 3 -> low                                       victim 3
//   Update 1 -> low, group 5                              low: 3 1 -> victim 3; group bytes move
//   Update 3 -> TTL 50 only (same class/group)            victim still 3 (no reordering)
//   Update 2 -> high; Update of an unknown id             no-op
//   drain                                                 -> 3 1 2
TEST(PolicyEngineTest, UpdateMovesEntriesBetweenClassesGroupsAndIndexes) {
  auto p = Engine("lru");
  for (uint64_t i = 1; i <= 3; ++i) p->OnInsert(Id(i), 10);
  EXPECT_EQ(Victim(*p), 1u);
  p->Update(Id(3), {.priority = kLow});
  EXPECT_EQ(Victim(*p), 3u);
  p->Update(Id(1), {.group = 5, .priority = kLow});
  EXPECT_EQ(p->group_bytes(5), 10u);
  EXPECT_EQ(p->group_bytes(0), 20u);
  EXPECT_EQ(Victim(*p), 3u);
  p->Update(Id(3), {.priority = kLow, .expires_at_us = 50});
  EXPECT_EQ(Victim(*p), 3u);
  EXPECT_EQ(p->NextExpiry(), 50);
  p->Update(Id(2), {.priority = kHigh});
  p->Update(Id(99), {.pinned = true});
  EXPECT_EQ(p->size(), 3u);
  EXPECT_EQ(p->tracked_bytes(), 30u);
  auto hints = p->HintsOf(Id(1));
  ASSERT_TRUE(hints.has_value());
  EXPECT_EQ(hints->group, 5u);
  EXPECT_EQ(hints->priority, kLow);
  EXPECT_FALSE(p->HintsOf(Id(99)).has_value());
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{3, 1, 2}));
  EXPECT_EQ(p->group_bytes(5), 0u);
}

// LFU keeps an entry's count across an Update: 1 has count 4, 2 has count 2. Moving 1 to low and
// back to normal must leave 2 the victim (a reset count of 1 would make 1 the victim).
TEST(PolicyEngineTest, UpdateKeepsWhatTheRankingLearned) {
  auto p = Engine("lfu");
  p->OnInsert(Id(1), 1);
  for (int i = 0; i < 3; ++i) p->OnAccess(Id(1));
  p->OnInsert(Id(2), 1);
  p->OnAccess(Id(2));
  EXPECT_EQ(Victim(*p), 2u);
  p->Update(Id(1), {.priority = kLow});
  EXPECT_EQ(Victim(*p), 1u);
  p->Update(Id(1), {});
  EXPECT_EQ(Victim(*p), 2u);
}

// ---- Randomized cross-check against an O(n) model ------------------------------------------

struct ModelEntry {
  uint64_t bytes;
  EntryHints hints;
  int count;    // LFU use count (no aging in these runs).
  int64_t seq;  // Recency (LRU, LFU tie) or insertion (FIFO) stamp; cold inserts go negative.
};

// The exact victim order for lru/fifo/lfu (without aging): min (class, count, seq).
class Model {
 public:
  explicit Model(std::string_view kind) : kind_(kind) {}

  void Insert(uint64_t id, uint64_t bytes, EntryHints h) {
    ModelEntry e{bytes, h, h.cold ? 0 : 1, h.cold ? --cold_ : ++now_};
    e.hints.cold = false;
    if (h.priority > kHigh) e.hints.priority = kHigh;
    entries_[id] = e;
  }
  void Access(uint64_t id) {
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.hints.pinned || kind_ == "fifo") return;
    it->second.count = std::min(it->second.count + 1, 255);
    it->second.seq = ++now_;
  }
  void Remove(uint64_t id) { entries_.erase(id); }
  void Update(uint64_t id, EntryHints h) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    EntryHints& old = it->second.hints;
    bool moved = old.group != h.group || old.priority != h.priority || old.pinned != h.pinned;
    h.cold = false;
    old = h;
    if (moved) it->second.seq = ++now_;
  }
  std::vector<uint64_t> TakeExpired(int64_t now, size_t max) {
    std::vector<std::tuple<int64_t, uint64_t, uint64_t>> due;  // (deadline, high, id)
    for (auto& [id, e] : entries_) {
      if (e.hints.expires_at_us != 0 && e.hints.expires_at_us <= now) {
        due.emplace_back(e.hints.expires_at_us, Id(id).high, id);
      }
    }
    std::sort(due.begin(), due.end());
    std::vector<uint64_t> out;
    for (auto& [at, high, id] : due) {
      if (out.size() == max) break;
      out.push_back(id);
      entries_.erase(id);
    }
    return out;
  }
  // 0 if none. `group` < 0: any group.
  uint64_t Victim(const VictimFilter* f, int64_t group) const {
    std::optional<std::tuple<int, int, int64_t>> best;
    uint64_t best_id = 0;
    for (auto& [id, e] : entries_) {
      if (e.hints.pinned || (group >= 0 && e.hints.group != group)) continue;
      if (f != nullptr && !(*f)(Id(id))) continue;
      std::tuple<int, int, int64_t> key{static_cast<int>(e.hints.priority),
                                        kind_ == "lfu" ? e.count : 0, e.seq};
      if (!best || key < *best) {
        best = key;
        best_id = id;
      }
    }
    return best_id;
  }
  uint64_t Bytes(std::optional<uint32_t> group, bool pinned_only) const {
    uint64_t sum = 0;
    for (auto& [id, e] : entries_) {
      if (group && e.hints.group != *group) continue;
      if (pinned_only && !e.hints.pinned) continue;
      sum += e.bytes;
    }
    return sum;
  }
  size_t size() const { return entries_.size(); }

 private:
  std::string kind_;
  std::map<uint64_t, ModelEntry> entries_;
  int64_t now_ = 0;
  int64_t cold_ = 0;
};

// Random hints over 3 groups, all classes, some pinned, some with deadlines.
EntryHints RandomHints(std::mt19937_64& rng) {
  EntryHints h;
  h.group = static_cast<uint32_t>(rng() % 3);
  h.priority = static_cast<Priority>(rng() % 3);
  h.pinned = rng() % 8 == 0;
  h.expires_at_us = rng() % 4 == 0 ? static_cast<int64_t>(1 + rng() % 1000) : 0;
  return h;
}

uint64_t Low(const std::optional<Hash128>& id) { return id ? id->low : 0; }

// Runs a random trace through `kind` and checks every step: exact victims against the model when
// `exact`, otherwise the invariants every kind must keep (accounting, group victim consistency).
void RunRandomTrace(std::string_view kind, bool exact, uint64_t seed) {
  SCOPED_TRACE(std::string(kind) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  PolicyEngineOptions options;
  if (exact) {
    options.lfu_aging_min_ops = 1u << 30;  // The model has no aging.
  } else {
    // Age often, but not so often that counts stay below 3: group lists must follow halvings
    // that merge lists and accesses that then move entries past unmerged ones.
    options.lfu_aging_min_ops = 96;
    options.lfu_aging_ops_per_entry = 0;
  }
  auto p = Engine(kind, options);
  Model model(kind);
  uint64_t quota[3] = {0, 0, 0};
  VictimFilter odd_only = [](const Hash128& id) { return id.low % 2 == 1; };
  for (int step = 0; step < 6000; ++step) {
    uint64_t id = 1 + rng() % 80;
    switch (rng() % 12) {
      case 0:
      case 1:
      case 2: {
        EntryHints h = RandomHints(rng);
        h.cold = rng() % 6 == 0;
        uint64_t bytes = rng() % 100;
        p->OnInsert(Id(id), bytes, h);
        model.Insert(id, bytes, h);
        break;
      }
      case 3:
      case 4:
      case 5:
        if (rng() % 2 == 0) id = 1 + rng() % 12;  // Skewed, so that LFU counts grow.
        p->OnAccess(Id(id));
        model.Access(id);
        break;
      case 6:
        p->OnRemove(Id(id), rng() % 2 ? RemoveReason::kEvicted : RemoveReason::kDropped);
        model.Remove(id);
        break;
      case 7: {  // Evict the victim, as the page store does.
        auto v = p->PickVictim();
        if (v) {
          p->OnRemove(*v);
          model.Remove(v->low);
        }
        break;
      }
      case 8: {
        EntryHints h = RandomHints(rng);
        p->Update(Id(id), h);
        model.Update(id, h);
        break;
      }
      case 9: {
        int64_t now = static_cast<int64_t>(rng() % 1000);
        size_t max = rng() % 4;
        std::vector<uint64_t> got;
        for (const Hash128& h : p->TakeExpired(now, max)) got.push_back(h.low);
        ASSERT_EQ(got, model.TakeExpired(now, max)) << "step " << step;
        break;
      }
      case 10: {
        uint32_t g = static_cast<uint32_t>(rng() % 3);
        quota[g] = rng() % 3 == 0 ? 0 : rng() % 2000;
        p->SetGroupQuota(g, quota[g]);
        break;
      }
      default:
        break;
    }
    ASSERT_EQ(p->size(), model.size()) << "step " << step;
    ASSERT_EQ(p->tracked_bytes(), model.Bytes(std::nullopt, false)) << "step " << step;
    ASSERT_EQ(p->pinned_bytes(), model.Bytes(std::nullopt, true)) << "step " << step;
    for (uint32_t g = 0; g < 3; ++g) {
      ASSERT_EQ(p->group_bytes(g), model.Bytes(g, false)) << "step " << step;
      // Over quota, the victim is the group's own first victim in global order, for every kind.
      uint64_t incoming = rng() % 500;
      bool over = quota[g] != 0 && p->group_bytes(g) + incoming > quota[g];
      ASSERT_EQ(p->OverQuota(g, incoming), over);
      VictimFilter in_group = [&](const Hash128& h) {
        auto hints = p->HintsOf(h);
        return hints && hints->group == g && h.low % 2 == 1;
      };
      uint64_t want = over ? Low(p->PickVictim(in_group)) : Low(p->PickVictim(odd_only));
      ASSERT_EQ(Low(p->PickVictimForInsert(g, incoming, &odd_only)), want) << "step " << step;
      if (exact) {
        ASSERT_EQ(Low(p->PickVictimForInsert(g, incoming)),
                  model.Victim(nullptr, over ? static_cast<int64_t>(g) : -1))
            << "step " << step;
      }
    }
    if (exact) {
      ASSERT_EQ(Low(p->PickVictim()), model.Victim(nullptr, -1)) << "step " << step;
      ASSERT_EQ(Low(p->PickVictim(odd_only)), model.Victim(&odd_only, -1)) << "step " << step;
    }
  }
}

TEST(PolicyEngineTest, LruMatchesModelOnRandomTraces) { RunRandomTrace("lru", true, 1); }
TEST(PolicyEngineTest, FifoMatchesModelOnRandomTraces) { RunRandomTrace("fifo", true, 2); }
TEST(PolicyEngineTest, LfuWithoutAgingMatchesModelOnRandomTraces) {
  RunRandomTrace("lfu", true, 3);
}
TEST(PolicyEngineTest, LfuWithAgingKeepsInvariantsOnRandomTraces) {
  RunRandomTrace("lfu", false, 4);
}
TEST(PolicyEngineTest, MlKeepsInvariantsOnRandomTraces) { RunRandomTrace("ml", false, 5); }

}  // namespace
}  // namespace cairn::policy
