// EvictionTracker: which parts of the namespace the cache keeps evicting ("top evicted
// prefixes" in `cairn report`). Each evicted page is charged to a prefix of its namespace path:
// the mount path plus the first `depth` folders below it ("/lake/train/x/a.jpg" at depth 1 ->
// "/lake/train"). At most `capacity` prefixes are tracked (space-saving: a new prefix
// replaces the one with the fewest bytes and inherits its count as a known over-estimate bound,
// so heavy hitters are never lost). Exported as
//   cairn_evicted_bytes_by_prefix_total{prefix="..."}  (counter-like: bytes evicted)
// one series per tracked prefix (bounded by `capacity`). It also counts, per mount, the pages
// that left the cache without being asked to:
//   cairn_mount_removals_total{mount="/lake",reason="capacity|quota|ttl"}  (pages)
// (PageService adds reason="freed" for `cairn free`).
//
// Thread-safety: thread-safe.
#ifndef CAIRN_WORKER_EVICTION_TRACKER_H_
#define CAIRN_WORKER_EVICTION_TRACKER_H_

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_annotations.h"
#include "metrics/registry.h"
#include "pagestore/page_store.h"
#include "worker/page_rules.h"

namespace cairn::worker {

class EvictionTracker {
 public:
  // `rules` maps object ids to namespace paths; `registry` gets the series. Both borrowed; they
  // must outlive the tracker.
  EvictionTracker(const PageRules* rules, metrics::Registry* registry, size_t capacity = 64,
                  int depth = 1);
  ~EvictionTracker();

  // Records one page that left the cache (the page store's eviction listener). Evictions
  // (capacity, quota) are charged to their prefix; every reason counts per mount.
  void Record(std::string_view object_id, uint64_t bytes, pagestore::EvictionReason reason)
      EXCLUDES(mu_);

  // The tracked prefixes with their bytes, largest first.
  std::vector<std::pair<std::string, uint64_t>> Top(size_t n) const EXCLUDES(mu_);

 private:
  std::string PrefixOf(std::string_view object_id) const;
  double BytesOf(const std::string& prefix) const EXCLUDES(mu_);

  const PageRules* rules_;
  metrics::Registry* registry_;
  const size_t capacity_;
  const int depth_;
  mutable Mutex mu_;
  std::map<std::string, uint64_t> bytes_ GUARDED_BY(mu_);
  // Per mount and reason (index = EvictionReason): made on first use; mounts are few.
  std::map<std::string, std::array<metrics::Counter*, 3>> by_mount_ GUARDED_BY(mu_);
  Mutex registry_mu_;  // Serialises series registration (never held with mu_).
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_EVICTION_TRACKER_H_
