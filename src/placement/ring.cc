#include "placement/ring.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>

// Inlined so the per-node hash of an 8-byte key compiles down to a few multiplies (no call).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace cairn::placement {
namespace {

// Hashes the little-endian bytes of `value` (host byte order must not matter). memcpy of the
// whole word rather than a byte loop lets the compiler keep it in a register: a byte loop followed
// by XXH3's word loads stalls on store forwarding and tripled Owner()'s cost.
inline uint64_t HashU64(uint64_t value, uint64_t seed) {
  if constexpr (std::endian::native == std::endian::big) value = __builtin_bswap64(value);
  unsigned char bytes[8];
  std::memcpy(bytes, &value, sizeof(bytes));
  return XXH3_64bits_withSeed(bytes, sizeof(bytes), seed);
}

// The ranking value of a draw: ln(u)/w orders nodes exactly like the textbook -w/ln(u) (both are
// increasing in u and in w, since ln(u) < 0) and is the one both Owner and Candidates compute, so
// they always agree on the winner.
inline double RankValue(double u, double weight) { return std::log(u) / weight; }

// A node's standing for one key; larger is better. Ties (probability ~2^-53) fall back to the
// raw draw, then to the node's position in id order, so the order is total and deterministic.
struct Standing {
  double rank;
  double u;
  size_t index;
};

inline bool Better(const Standing& a, const Standing& b) {
  if (a.rank != b.rank) return a.rank > b.rank;
  if (a.u != b.u) return a.u > b.u;
  return a.index < b.index;
}

}  // namespace

uint64_t PageKeyHash(std::string_view object_id, std::string_view /*version*/,
                     uint64_t page_index) {
  const uint64_t object_hash = XXH3_64bits(object_id.data(), object_id.size());
  return HashU64(page_index, object_hash);
}

StatusOr<Ring> Ring::Create(std::vector<WorkerNode> nodes) {
  std::unordered_set<std::string_view> ids;
  for (const WorkerNode& node : nodes) {
    if (node.id.empty()) return InvalidArgumentError("placement: worker node with an empty id");
    if (!std::isfinite(node.weight) || node.weight <= 0) {
      return InvalidArgumentError("placement: worker '" + node.id +
                                  "' has a weight that is not a finite number > 0");
    }
    if (!ids.insert(node.id).second) {
      return InvalidArgumentError("placement: duplicate worker id '" + node.id + "'");
    }
  }
  ids.clear();  // Views into `nodes`, which is about to be reordered.

  Ring ring;
  std::sort(nodes.begin(), nodes.end(),
            [](const WorkerNode& a, const WorkerNode& b) { return a.id < b.id; });
  ring.nodes_ = std::move(nodes);
  ring.seeds_.reserve(ring.nodes_.size());
  for (size_t i = 0; i < ring.nodes_.size(); ++i) {
    const std::string& id = ring.nodes_[i].id;
    ring.seeds_.push_back(XXH3_64bits(id.data(), id.size()));
    const double weight = ring.nodes_[i].weight;
    auto group = std::find_if(ring.groups_.begin(), ring.groups_.end(),
                              [weight](const WeightGroup& g) { return g.weight == weight; });
    if (group == ring.groups_.end()) {
      ring.groups_.push_back(WeightGroup{weight, {}});
      group = ring.groups_.end() - 1;
    }
    group->members.push_back(i);
  }
  std::sort(ring.groups_.begin(), ring.groups_.end(),
            [](const WeightGroup& a, const WeightGroup& b) { return a.weight < b.weight; });
  return ring;
}

inline double Ring::Draw(size_t index, uint64_t key_hash) const {
  // The top 53 bits, centred in their interval: u is never 0 (ln would be -inf) nor 1 (ln = 0
  // would make every weight score infinite).
  const uint64_t h = HashU64(key_hash, seeds_[index]);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1p-53;
}

const WorkerNode* Ring::Owner(uint64_t key_hash) const {
  if (nodes_.empty()) return nullptr;
  bool have_best = false;
  Standing best{0, 0, 0};
  for (const WeightGroup& group : groups_) {
    // Within a group the rank is monotonic in u, so the group's best is its largest draw
    // (lowest index on an exact tie, as in Better()).
    size_t top = group.members.front();
    double top_u = Draw(top, key_hash);
    for (size_t m = 1; m < group.members.size(); ++m) {
      const double u = Draw(group.members[m], key_hash);
      if (u > top_u) {
        top_u = u;
        top = group.members[m];
      }
    }
    if (groups_.size() == 1) return &nodes_[top];
    const Standing candidate{RankValue(top_u, group.weight), top_u, top};
    if (!have_best || Better(candidate, best)) {
      best = candidate;
      have_best = true;
    }
  }
  return &nodes_[best.index];
}

std::vector<const WorkerNode*> Ring::Candidates(uint64_t key_hash, size_t n) const {
  std::vector<const WorkerNode*> out;
  n = std::min(n, nodes_.size());
  if (n == 0) return out;
  std::vector<Standing> standings;
  standings.reserve(nodes_.size());
  // With a single weight the rank is monotonic in u, so a constant rank (Better() then orders by
  // u, then index) gives exactly the same order without N logarithms.
  const bool single_weight = groups_.size() == 1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const double u = Draw(i, key_hash);
    const double rank = single_weight ? 0.0 : RankValue(u, nodes_[i].weight);
    standings.push_back(Standing{rank, u, i});
  }
  std::partial_sort(standings.begin(), standings.begin() + static_cast<std::ptrdiff_t>(n),
                    standings.end(), Better);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(&nodes_[standings[i].index]);
  return out;
}

}  // namespace cairn::placement
