// FIFO (and the LRU/FIFO difference) through PolicyEngine, against hand-computed traces.
#include <gtest/gtest.h>

#include <vector>

#include "policy/test_util.h"

namespace cairn::policy {
namespace {

using testing::Drain;
using testing::Engine;
using testing::Id;
using testing::Victim;

// Trace (hand-computed; queue shown oldest first = next victim first):
//   1. insert 1,2,3          -> 1 2 3        victim 1
//   2. access 1              -> 1 2 3        victim 1 (accesses do not reorder)
//   3. insert 4              -> 1 2 3 4      victim 1
//   4. access 2, access 3    -> 1 2 3 4      victim 1
//   5. remove 1              -> 2 3 4        victim 2
//   6. insert 2 again        -> 3 4 2        victim 3 (a new copy joins the back)
//   7. cold insert 5         -> 5 3 4 2      victim 5 (cold goes to the front)
//   8. drain                 -> 5 3 4 2
TEST(FifoPolicyTest, EvictsInInsertionOrderWhateverTheAccesses) {
  auto p = Engine("fifo");
  EXPECT_EQ(p->name(), "fifo");
  p->OnInsert(Id(1), 10);
  p->OnInsert(Id(2), 20);
  p->OnInsert(Id(3), 30);
  EXPECT_EQ(Victim(*p), 1u);
  p->OnAccess(Id(1));
  EXPECT_EQ(Victim(*p), 1u);
  p->OnInsert(Id(4), 40);
  EXPECT_EQ(Victim(*p), 1u);
  p->OnAccess(Id(2));
  p->OnAccess(Id(3));
  EXPECT_EQ(Victim(*p), 1u);
  p->OnRemove(Id(1));
  EXPECT_EQ(Victim(*p), 2u);
  p->OnInsert(Id(2), 25);
  EXPECT_EQ(Victim(*p), 3u);
  EXPECT_EQ(p->tracked_bytes(), 95u);
  p->OnInsert(Id(5), 5, {.cold = true});
  EXPECT_EQ(Victim(*p), 5u);
  EXPECT_EQ(Drain(*p), (std::vector<uint64_t>{5, 3, 4, 2}));
  EXPECT_EQ(p->size(), 0u);
  EXPECT_EQ(p->tracked_bytes(), 0u);
}

// The same accesses reorder under LRU: insert 1,2,3, access 1 -> victim 2 (FIFO: 1).
TEST(FifoPolicyTest, DiffersFromLruExactlyOnAccesses) {
  auto fifo = Engine("fifo");
  auto lru = Engine("lru");
  for (auto* p : {fifo.get(), lru.get()}) {
    for (uint64_t i = 1; i <= 3; ++i) p->OnInsert(Id(i), 1);
    p->OnAccess(Id(1));
  }
  EXPECT_EQ(Drain(*fifo), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Drain(*lru), (std::vector<uint64_t>{2, 3, 1}));
}

// Filter: 1 is in use. Queue 1 2 3 -> victim 2; nothing allowed -> none.
TEST(FifoPolicyTest, FilterSkipsRejectedEntries) {
  auto p = Engine("fifo");
  for (uint64_t i = 1; i <= 3; ++i) p->OnInsert(Id(i), 1);
  EXPECT_EQ(p->PickVictim([](const Hash128& id) { return id.low != 1; }), Id(2));
  EXPECT_FALSE(p->PickVictim([](const Hash128&) { return false; }).has_value());
  EXPECT_EQ(Victim(*p), 1u);
}

}  // namespace
}  // namespace cairn::policy
