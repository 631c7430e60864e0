// LFU through PolicyEngine, against hand-computed traces (counts, recency ties, saturation, aging).
#include <gtest/gtest.h>

#include <vector>

#include "policy/test_util.h"

namespace cairn::policy {
namespace {

using testing::Drain;
using testing::Engine;
using testing::Id;
using testing::Victim;

// Aging far away, so counts are exact.
PolicyEngineOptions NoAging() {
  return {.lfu_aging_min_ops = 1u << 30, .lfu_aging_ops_per_entry = 0};
}

// Trace (hand-computed; "id:count", lists per count, least recent first):
//   1. insert 1,2,3  -> c1: 1 2 3                victim 1
//   2. access 1      -> c1: 2 3   c2: 1          victim 2
//   3. access 1      -> c1: 2 3   c3: 1          victim 2
//   4. access 2      -> c1: 3   c2: 2   c3: 1    victim 3
//   5. insert 4      -> c1: 3 4 ...              victim 3 (3 reached count 1 first)
//   6. access 3      -> c1: 4   c2: 2 3   c3: 1  victim 4
//   7. remove 4      -> c2: 2 3   c3: 1          victim 2
//   8. access 2      -> c2: 3   c3: 1 2          victim 3
//   9. cold insert 5 -> c0: 5 ...                victim 5
//  10. drain         -> 5 3 1 2
TEST(LfuPolicyTest, EvictsLeastFrequentThenLeastRecent) {
  auto p = Engine("lfu", NoAging());
  EXPECT_EQ(p->name(), "lfu");
  p->OnInsert(Id(1), 1);
  p->OnInsert(Id(2), 2);
  p->OnInsert(Id(3), 3);
  EXPECT_EQ(Victim(*p), 1u);
  p->OnAccess(Id(1));
  EXPECT_EQ(Victim(*p), 2u);
  p->OnAccess(Id(1));
  EXPECT_EQ(Victim(*p), 2u);
  p->OnAccess(Id(2));
  EXPECT_EQ(Victim(*p), 3u);
  p->OnInsert(Id(4), 4);
  EXPECT_EQ(Victim(*p), 3u);
  p->OnAccess(Id(3));
  EXPECT_EQ(Victim(*p), 4u);
  p->OnRemove(Id(4));
  EXPECT_EQ(Victim(*p), 2u);
  p->OnAccess(Id(2));
  EXPECT_EQ(Victim(*p), 3u);
  p->OnInsert(Id(5), 5, {.cold = true});
  EXPECT_EQ(Victim(*p), 5u);
  EXPECT_EQ(p->tracked_bytes(), 11u);
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{5, 3, 1, 2}));
}

// Counts stop at 255; at 255 an access only refreshes recency. 1 is accessed 300 times, then 2
// reaches 255 after it: both are at 255 and 1 is less recent, so 1 goes first. Uncapped counts
// (301 vs 255) would evict 2.
TEST(LfuPolicyTest, CountsSaturateAt255) {
  auto p = Engine("lfu", NoAging());
  p->OnInsert(Id(1), 1);
  for (int i = 0; i < 300; ++i) p->OnAccess(Id(1));
  p->OnInsert(Id(2), 1);
  for (int i = 0; i < 254; ++i) p->OnAccess(Id(2));
  EXPECT_EQ(Victim(*p), 1u);
  p->OnAccess(Id(1));
  EXPECT_EQ(Victim(*p), 2u);
}

// Aging period 8 (max(8, 0 x entries)): every count >= 2 is halved after each 8th insert/access.
//   ops 1-8:  insert 1, access 1 x7        -> 1:8; op 8 ends the period: 1:4
//   ops 1-4:  insert 2, access 2 x3        -> 2:4; c4: 1 2 (1 arrived by halving first)
//                                             victim 1 (without aging 1:8 would keep 2 the victim)
//   op 5:     access 1                     -> 1:5              victim 2
//   ops 6-7:  access 2 x2                  -> 2:6              victim 1
//   op 8:     insert 3                     -> 3:1, period ends: 1:2 2:3 3:1   victim 3
//   op 1:     access 1 (count caught up lazily from 5 to 2, then +1) -> 1:3; c3: 2 1
//   drain                                  -> 3 2 1
TEST(LfuPolicyTest, AgingHalvesCountsSoOldHotEntriesLeave) {
  auto p = Engine("lfu", {.lfu_aging_min_ops = 8, .lfu_aging_ops_per_entry = 0});
  p->OnInsert(Id(1), 1);
  for (int i = 0; i < 7; ++i) p->OnAccess(Id(1));
  p->OnInsert(Id(2), 1);
  for (int i = 0; i < 3; ++i) p->OnAccess(Id(2));
  EXPECT_EQ(Victim(*p), 1u);
  p->OnAccess(Id(1));
  EXPECT_EQ(Victim(*p), 2u);
  p->OnAccess(Id(2));
  p->OnAccess(Id(2));
  EXPECT_EQ(Victim(*p), 1u);
  p->OnInsert(Id(3), 1);
  EXPECT_EQ(Victim(*p), 3u);
  p->OnAccess(Id(1));
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{3, 2, 1}));
}

// Counts that merge at a halving keep "lower count before halving first", not pure recency:
//   insert A=1, B=2, C=3; access C, C (C:3); access B (B:2)  -> 6 ops, period 6 ends:
//   c1 gets c1 (A), then c2 (B), then c3 (C)  -> A B C (recency alone would give A C B).
TEST(LfuPolicyTest, HalvingMergesListsInAscendingCountOrder) {
  auto p = Engine("lfu", {.lfu_aging_min_ops = 6, .lfu_aging_ops_per_entry = 0});
  for (uint64_t i = 1; i <= 3; ++i) p->OnInsert(Id(i), 1);
  p->OnAccess(Id(3));
  p->OnAccess(Id(3));
  p->OnAccess(Id(2));
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{1, 2, 3}));
}

// The aging period grows with the number of entries (8 per entry by default), so a big cache
// does not forget its counts every 1024 operations. With 200 entries the period is 1600: 1:3
// after 1,599 ops is still above every fresh entry.
TEST(LfuPolicyTest, AgingPeriodScalesWithEntries) {
  auto p = Engine("lfu");
  for (uint64_t i = 1; i <= 200; ++i) p->OnInsert(Id(i), 1);  // 200 ops
  p->OnAccess(Id(1));
  p->OnAccess(Id(1));  // 1:3, 202 ops
  for (int round = 0; round < 7; ++round) {
    for (uint64_t i = 2; i <= 200; ++i) {
      p->OnRemove(Id(i));
      p->OnInsert(Id(i), 1);
    }
  }  // 202 + 7 x 199 = 1,595 ops < 1,600: no halving yet; every other entry has count 1.
  EXPECT_EQ(Victim(*p), 2u);
  std::vector<uint64_t> order = Drain(*p);
  EXPECT_EQ(order.back(), 1u);
}

}  // namespace
}  // namespace cairn::policy
