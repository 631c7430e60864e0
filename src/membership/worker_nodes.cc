#include "membership/worker_nodes.h"

#include <spdlog/spdlog.h>

#include "membership/records.h"

namespace cairn::membership {

std::vector<placement::WorkerNode> WorkerNodesFromSnapshot(const PrefixMirror::Snapshot& snapshot) {
  std::vector<placement::WorkerNode> nodes;
  for (const auto& [key, value] : snapshot) {
    StatusOr<WorkerRecord> record = DecodeWorkerRecord(value);
    if (!record.ok()) {
      spdlog::warn("ignoring worker record {}: {}", key, record.status().ToString());
      continue;
    }
    // Equal weights: capacity-weighted placement would move pages whenever a disk is resized.
    nodes.push_back({record->id, record->address, 1.0});
  }
  return nodes;
}

}  // namespace cairn::membership
