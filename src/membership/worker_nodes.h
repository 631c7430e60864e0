// The placement ring's nodes from the worker records in etcd: the one conversion clients and
// workers share, so both rank a page's replicas the same way.
// Thread-safety: pure.
#ifndef CAIRN_MEMBERSHIP_WORKER_NODES_H_
#define CAIRN_MEMBERSHIP_WORKER_NODES_H_

#include <vector>

#include "membership/prefix_mirror.h"
#include "placement/ring.h"

namespace cairn::membership {

// One node per worker record in `snapshot` (keys under /cairn/v1/workers/), with the record's
// id and address and weight 1. A record that does not decode is skipped (and logged).
std::vector<placement::WorkerNode> WorkerNodesFromSnapshot(const PrefixMirror::Snapshot& snapshot);

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_WORKER_NODES_H_
