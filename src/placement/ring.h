// Placement: which worker owns a page, and in which order the others take over.
//
// Weighted rendezvous (highest-random-weight) hashing. For a key hash k every node i draws
// u_i = U(XXH3(k, seed = hash(id_i))) in (0,1) and scores s_i = -w_i / ln(u_i); the highest score
// owns the key, the next ones are the failover / replica order. -ln(u_i)/w_i is exponentially
// distributed with rate w_i, so node i wins with probability w_i / sum(w): shares follow weights.
// A node's score for a key does not depend on the other nodes, so removing a node moves only the
// keys it owned (each to its own runner-up) and adding a node moves to it only the keys it now wins
// (w_new / sum(w) of them). See docs/placement.md for why this beats a virtual-node ring here.
//
// Pure code: no I/O, no threads, no clocks; deterministic across processes and machines (XXH3 is
// a stable, endian-independent format since xxhash 0.8.0), so clients, workers and the capacity
// simulator agree on placement given the same node list (in any order).
#ifndef CAIRN_PLACEMENT_RING_H_
#define CAIRN_PLACEMENT_RING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::placement {

struct WorkerNode {
  std::string id;       // Stable identity of the worker (survives restarts and address changes).
  std::string address;  // "host:port" the data path connects to; not used for placement.
  double weight = 1.0;  // Relative share of keys (e.g. proportional to cache capacity); > 0.
};

// The placement key of one page of an object.
//
// Only `object_id` and `page_index` enter the hash; `version` is deliberately ignored (and kept in
// the signature so that callers state what they have): when an object is overwritten, the pages
// of the new version land on the same worker as the old ones, so the stale pages age out of that
// worker's LRU instead of occupying space on one worker while the new ones fill another, and
// placement never depends on metadata a client may not have yet. Version correctness is the page
// store's job (pages are keyed by version there). Consecutive pages of one object get unrelated
// hashes, so a large object is spread over all workers and read in parallel.
//
// Formula (a stable format: every client and worker must compute the same value):
//   PageKeyHash = XXH3_64bits_withSeed(little_endian_u64(page_index), 8, XXH3_64bits(object_id))
// Thread-safe; pure.
uint64_t PageKeyHash(std::string_view object_id, std::string_view version, uint64_t page_index);

// An immutable set of nodes answering "who owns this key". Build a new Ring when membership
// changes (construction is O(N log N); N = tens to hundreds).
// Thread-safety: const methods are safe to call concurrently; a Ring is a value (copyable,
// movable). Pointers it returns point into the Ring and stay valid until it is destroyed, moved
// from or assigned to.
class Ring {
 public:
  // An empty ring: Owner() returns nullptr and Candidates() an empty vector.
  Ring() = default;

  // Builds a ring from `nodes` (taken by value; the order does not matter: two rings of the same
  // nodes in any order place every key identically).
  // Errors: InvalidArgument if a node has an empty id, a duplicate id, or a weight that is not a
  // finite number > 0. An empty `nodes` is valid and gives an empty ring.
  static StatusOr<Ring> Create(std::vector<WorkerNode> nodes);

  // The node that owns `key_hash`, or nullptr if the ring is empty. O(N) hashing with no
  // logarithm when all weights are equal (one per distinct weight otherwise); ~150 ns at N=60.
  const WorkerNode* Owner(uint64_t key_hash) const;

  // The min(n, size()) highest-ranked nodes for `key_hash`, best first, all distinct:
  // Candidates(k, n)[0] == Owner(k), then the node that would own k if the owner left, and so on
  // (the failover and replica order). O(N log n); one logarithm per node unless all weights are
  // equal (~0.6 us at N=60 with equal weights, ~1 us with mixed ones).
  std::vector<const WorkerNode*> Candidates(uint64_t key_hash, size_t n) const;

  size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }
  // The nodes sorted by id (not in the order given to Create).
  const std::vector<WorkerNode>& nodes() const { return nodes_; }

 private:
  // Nodes sharing one weight: their ranking within the group is by u alone, so Owner needs a
  // logarithm only for the best of each group.
  struct WeightGroup {
    double weight;
    std::vector<size_t> members;  // Indices into nodes_, ascending.
  };

  // The uniform draw u in (0,1) of node `index` for `key_hash`.
  double Draw(size_t index, uint64_t key_hash) const;

  std::vector<WorkerNode> nodes_;    // Sorted by id.
  std::vector<uint64_t> seeds_;      // seeds_[i] = XXH3_64bits(nodes_[i].id).
  std::vector<WeightGroup> groups_;  // Sorted by weight.
};

}  // namespace cairn::placement

#endif  // CAIRN_PLACEMENT_RING_H_
