#include "placement/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace cairn::placement {
namespace {

constexpr size_t kKeys = 100'000;

// Page keys shaped like real traffic: 1,000 objects of 100 pages each.
std::vector<uint64_t> MakeKeys(size_t count = kKeys) {
  std::vector<uint64_t> keys;
  keys.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    keys.push_back(PageKeyHash("s3://lake/train/shard-" + std::to_string(i / 100) + ".tar",
                               "etag-1", i % 100));
  }
  return keys;
}

std::vector<WorkerNode> MakeNodes(size_t count, double weight = 1.0) {
  std::vector<WorkerNode> nodes;
  for (size_t i = 0; i < count; ++i) {
    nodes.push_back(WorkerNode{"worker-" + std::to_string(i),
                               "10.0.0." + std::to_string(i + 1) + ":7070", weight});
  }
  return nodes;
}

Ring MustCreate(std::vector<WorkerNode> nodes) {
  StatusOr<Ring> ring = Ring::Create(std::move(nodes));
  EXPECT_TRUE(ring.ok()) << ring.status().ToString();
  return ring.ok() ? std::move(ring).value() : Ring();
}

std::vector<std::string> Owners(const Ring& ring, const std::vector<uint64_t>& keys) {
  std::vector<std::string> owners;
  owners.reserve(keys.size());
  for (uint64_t key : keys) owners.push_back(ring.Owner(key)->id);
  return owners;
}

std::map<std::string, size_t> CountByOwner(const std::vector<std::string>& owners) {
  std::map<std::string, size_t> counts;
  for (const std::string& id : owners) ++counts[id];
  return counts;
}

TEST(RingTest, EqualWeightsBalanceWithinTenPercent) {
  const Ring ring = MustCreate(MakeNodes(8));
  const auto counts = CountByOwner(Owners(ring, MakeKeys()));
  ASSERT_EQ(counts.size(), 8u);
  const double expected = static_cast<double>(kKeys) / 8;
  double max_imbalance = 0;
  for (const auto& [id, count] : counts) {
    const double deviation = std::abs(static_cast<double>(count) - expected) / expected;
    max_imbalance = std::max(max_imbalance, deviation);
    EXPECT_LT(deviation, 0.10) << id << " owns " << count;
  }
  std::cout << "[placement] 8 equal workers, " << kKeys
            << " keys: max imbalance = " << max_imbalance * 100 << "% of the fair share\n";
}

TEST(RingTest, SixtyWorkersBalance) {
  const Ring ring = MustCreate(MakeNodes(60));
  const auto counts = CountByOwner(Owners(ring, MakeKeys()));
  ASSERT_EQ(counts.size(), 60u);
  const double expected = static_cast<double>(kKeys) / 60;
  double max_imbalance = 0;
  for (const auto& [id, count] : counts) {
    max_imbalance =
        std::max(max_imbalance, std::abs(static_cast<double>(count) - expected) / expected);
  }
  // 1,667 keys per node: sigma is ~2.4%, so 60 nodes stay well inside 12%.
  EXPECT_LT(max_imbalance, 0.12);
  std::cout << "[placement] 60 equal workers, " << kKeys
            << " keys: max imbalance = " << max_imbalance * 100 << "% of the fair share\n";
}

TEST(RingTest, AddingANodeMovesAboutOneNinthAndOnlyToIt) {
  const std::vector<uint64_t> keys = MakeKeys();
  std::vector<WorkerNode> nodes = MakeNodes(9);
  const WorkerNode newcomer = nodes.back();
  nodes.pop_back();
  const std::vector<std::string> before = Owners(MustCreate(nodes), keys);
  nodes.push_back(newcomer);
  const std::vector<std::string> after = Owners(MustCreate(nodes), keys);

  size_t moved = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (before[i] == after[i]) continue;
    ++moved;
    EXPECT_EQ(after[i], newcomer.id) << "key " << i << " moved between two old nodes";
  }
  const double fraction = static_cast<double>(moved) / static_cast<double>(keys.size());
  EXPECT_GE(fraction, 0.09);
  EXPECT_LE(fraction, 0.13);
  std::cout << "[placement] 8 -> 9 workers: moved fraction = " << fraction
            << " (ideal 1/9 = " << 1.0 / 9 << ")\n";
}

TEST(RingTest, RemovingANodeMovesOnlyItsKeysToTheirFailover) {
  const std::vector<uint64_t> keys = MakeKeys();
  std::vector<WorkerNode> nodes = MakeNodes(8);
  const Ring full = MustCreate(nodes);
  const std::string removed = "worker-3";
  std::erase_if(nodes, [&](const WorkerNode& n) { return n.id == removed; });
  const Ring reduced = MustCreate(nodes);

  size_t moved = 0;
  for (uint64_t key : keys) {
    const std::string old_owner = full.Owner(key)->id;
    const std::string new_owner = reduced.Owner(key)->id;
    if (old_owner != removed) {
      EXPECT_EQ(new_owner, old_owner);
      continue;
    }
    ++moved;
    // The failover order promised by Candidates is what actually happens.
    EXPECT_EQ(new_owner, full.Candidates(key, 2)[1]->id);
  }
  const double fraction = static_cast<double>(moved) / static_cast<double>(keys.size());
  EXPECT_NEAR(fraction, 1.0 / 8, 0.0125);
  std::cout << "[placement] 8 -> 7 workers: moved fraction = " << fraction
            << " (ideal 1/8 = " << 1.0 / 8 << ")\n";
}

TEST(RingTest, SharesFollowWeights) {
  std::vector<WorkerNode> nodes = MakeNodes(4, 2.0);
  for (WorkerNode& light : MakeNodes(8, 1.0)) {
    if (light.id >= "worker-4") nodes.push_back(light);  // worker-4..7 with weight 1.
  }
  ASSERT_EQ(nodes.size(), 8u);
  const Ring ring = MustCreate(nodes);
  const auto counts = CountByOwner(Owners(ring, MakeKeys()));
  // Total weight 12: heavy nodes 2/12 each, light ones 1/12.
  size_t heavy = 0;
  size_t light = 0;
  for (const WorkerNode& node : nodes) {
    const size_t count = counts.count(node.id) ? counts.at(node.id) : 0;
    const double expected = static_cast<double>(kKeys) * node.weight / 12;
    EXPECT_NEAR(static_cast<double>(count), expected, expected * 0.10) << node.id;
    (node.weight == 2.0 ? heavy : light) += count;
  }
  const double ratio = static_cast<double>(heavy) / static_cast<double>(light);
  EXPECT_NEAR(ratio, 2.0, 0.1);
  std::cout << "[placement] weights 2:1 (4+4 workers): heavy/light key ratio = " << ratio << "\n";
}

TEST(RingTest, PlacementDoesNotDependOnNodeOrder) {
  std::vector<WorkerNode> nodes = MakeNodes(20);
  nodes[3].weight = 3.0;
  nodes[7].weight = 0.5;
  const Ring a = MustCreate(nodes);
  std::mt19937 rng(42);
  std::shuffle(nodes.begin(), nodes.end(), rng);
  const Ring b = MustCreate(nodes);
  for (uint64_t key : MakeKeys(20'000)) {
    EXPECT_EQ(a.Owner(key)->id, b.Owner(key)->id);
    const auto ca = a.Candidates(key, 4);
    const auto cb = b.Candidates(key, 4);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(ca[i]->id, cb[i]->id);
  }
}

TEST(RingTest, CandidatesAreDistinctAndStartWithOwner) {
  // Equal weights take the logarithm-free paths; three distinct weights exercise Owner's
  // per-weight-group shortcut against Candidates' full ranking.
  std::vector<WorkerNode> mixed = MakeNodes(12);
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i].weight = 1.0 + static_cast<double>(i % 3);
  for (const Ring& ring : {MustCreate(MakeNodes(12)), MustCreate(mixed)}) {
    for (uint64_t key : MakeKeys(20'000)) {
      const std::vector<const WorkerNode*> all = ring.Candidates(key, ring.size());
      ASSERT_EQ(all.size(), ring.size());
      EXPECT_EQ(all[0], ring.Owner(key));
      std::set<const WorkerNode*> distinct(all.begin(), all.end());
      EXPECT_EQ(distinct.size(), all.size());
      // A shorter list is a prefix of the full ranking.
      const std::vector<const WorkerNode*> top3 = ring.Candidates(key, 3);
      ASSERT_EQ(top3.size(), 3u);
      EXPECT_TRUE(std::equal(top3.begin(), top3.end(), all.begin()));
    }
  }
}

TEST(RingTest, CandidatesClampToRingSize) {
  const Ring ring = MustCreate(MakeNodes(3));
  EXPECT_EQ(ring.Candidates(123, 10).size(), 3u);
  EXPECT_TRUE(ring.Candidates(123, 0).empty());
}

TEST(RingTest, EmptyRingHasNoOwner) {
  const Ring empty;
  EXPECT_EQ(empty.Owner(1), nullptr);
  EXPECT_TRUE(empty.Candidates(1, 3).empty());
  StatusOr<Ring> built = Ring::Create({});
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->Owner(1), nullptr);
  EXPECT_EQ(built->size(), 0u);
}

TEST(RingTest, SingleNodeOwnsEverything) {
  const Ring ring = MustCreate(MakeNodes(1));
  for (uint64_t key : MakeKeys(1000)) EXPECT_EQ(ring.Owner(key)->id, "worker-0");
}

TEST(RingTest, RejectsInvalidNodes) {
  EXPECT_EQ(Ring::Create({{"", "h:1", 1.0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create({{"a", "h:1", 1.0}, {"a", "h:2", 1.0}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create({{"a", "h:1", 0.0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create({{"a", "h:1", -1.0}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create({{"a", "h:1", NAN}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::Create({{"a", "h:1", INFINITY}}).status().code(), StatusCode::kInvalidArgument);
}

TEST(RingTest, NodesAreSortedByIdAndKeepAddresses) {
  const Ring ring = MustCreate({{"b", "host-b:1", 1.0}, {"a", "host-a:1", 2.0}});
  ASSERT_EQ(ring.size(), 2u);
  EXPECT_EQ(ring.nodes()[0].id, "a");
  EXPECT_EQ(ring.nodes()[0].address, "host-a:1");
  EXPECT_EQ(ring.nodes()[0].weight, 2.0);
  EXPECT_EQ(ring.nodes()[1].id, "b");
}

TEST(PageKeyHashTest, IgnoresVersionAndSeparatesPagesAndObjects) {
  EXPECT_EQ(PageKeyHash("bucket/obj", "v1", 7), PageKeyHash("bucket/obj", "v2", 7));
  EXPECT_NE(PageKeyHash("bucket/obj", "v1", 7), PageKeyHash("bucket/obj", "v1", 8));
  EXPECT_NE(PageKeyHash("bucket/obj", "v1", 7), PageKeyHash("bucket/obj2", "v1", 7));
}

// PageKeyHash and the ranking are a compatibility contract between clients, workers and the
// simulator of possibly different builds; these pinned values (cross-checked against the shared
// libxxhash 0.8.1, not the inlined copy) catch an accidental change.
TEST(PageKeyHashTest, FormatIsStable) {
  EXPECT_EQ(PageKeyHash("", "", 0), 0xf0a390d5a40e58dfULL);
  EXPECT_EQ(PageKeyHash("s3://lake/a.tar", "", 42), 0x8bc178f72f0f7235ULL);
  const Ring ring = MustCreate(MakeNodes(8));
  EXPECT_EQ(ring.Owner(PageKeyHash("s3://lake/a.tar", "", 42))->id, "worker-6");
}

}  // namespace
}  // namespace cairn::placement
