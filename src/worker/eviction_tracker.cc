#include "worker/eviction_tracker.h"

#include <algorithm>

namespace cairn::worker {
namespace {
constexpr const char* kSeries = "cairn_evicted_bytes_by_prefix_total";
}  // namespace

EvictionTracker::EvictionTracker(const PageRules* rules, metrics::Registry* registry,
                                 size_t capacity, int depth)
    : rules_(rules),
      registry_(registry),
      capacity_(std::max<size_t>(1, capacity)),
      depth_(std::max(0, depth)) {}

EvictionTracker::~EvictionTracker() {
  std::vector<std::string> prefixes;
  {
    MutexLock l(&mu_);
    for (const auto& [prefix, bytes] : bytes_) prefixes.push_back(prefix);
  }
  MutexLock r(&registry_mu_);
  for (const std::string& p : prefixes) registry_->RemoveCallback(kSeries, {{"prefix", p}});
}

std::string EvictionTracker::PrefixOf(std::string_view object_id) const {
  std::string mount_path, key;
  if (!rules_->Locate(object_id, &mount_path, &key)) return "(unmounted)";
  // The mount plus the first depth_ folders of the key (never the file name itself).
  std::string prefix = mount_path == "/" ? "" : mount_path;
  size_t start = 0;
  for (int d = 0; d < depth_; ++d) {
    size_t slash = key.find('/', start);
    if (slash == std::string::npos) break;
    prefix += "/" + key.substr(start, slash - start);
    start = slash + 1;
  }
  return prefix.empty() ? "/" : prefix;
}

void EvictionTracker::Record(std::string_view object_id, uint64_t bytes,
                             pagestore::EvictionReason reason) {
  std::string mount_path, key;
  if (rules_->Locate(object_id, &mount_path, &key)) {
    metrics::Counter* counter = nullptr;
    {
      MutexLock l(&mu_);
      auto it = by_mount_.find(mount_path);
      if (it != by_mount_.end()) counter = it->second[static_cast<int>(reason)];
    }
    if (counter == nullptr) {
      // A mount's first removal. The registry is not called under mu_: a scrape holds the
      // registry's lock while it reads BytesOf (which takes mu_). AddCounter returns the same
      // series to racing callers, so a lost race only repeats the lookup.
      std::array<metrics::Counter*, 3> counters{};
      const char* names[] = {"capacity", "quota", "ttl"};
      for (int i = 0; i < 3; ++i) {
        counters[i] = registry_->AddCounter(
            "cairn_mount_removals_total",
            "Pages that left the cache, by mount and reason (capacity/quota: evicted; ttl: "
            "expired; freed: cairn free)",
            {{"mount", mount_path}, {"reason", names[i]}});
      }
      MutexLock l(&mu_);
      counter = by_mount_.emplace(mount_path, counters).first->second[static_cast<int>(reason)];
    }
    counter->Increment();
  }
  if (reason == pagestore::EvictionReason::kExpired) return;  // Not an eviction.
  std::string prefix = PrefixOf(object_id);
  std::string added, removed;
  {
    MutexLock l(&mu_);
    auto it = bytes_.find(prefix);
    if (it != bytes_.end()) {
      it->second += bytes;
      return;
    }
    uint64_t inherited = 0;
    if (bytes_.size() >= capacity_) {
      auto smallest =
          std::min_element(bytes_.begin(), bytes_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      inherited = smallest->second;
      removed = smallest->first;
      bytes_.erase(smallest);
    }
    bytes_[prefix] = inherited + bytes;
    added = prefix;
  }
  MutexLock r(&registry_mu_);
  if (!removed.empty()) registry_->RemoveCallback(kSeries, {{"prefix", removed}});
  registry_->AddCallback(kSeries, "Bytes evicted to make room, by namespace prefix (top ones)",
                         metrics::MetricType::kCounter, [this, added] { return BytesOf(added); },
                         {{"prefix", added}});
}

double EvictionTracker::BytesOf(const std::string& prefix) const {
  MutexLock l(&mu_);
  auto it = bytes_.find(prefix);
  return it == bytes_.end() ? 0 : static_cast<double>(it->second);
}

std::vector<std::pair<std::string, uint64_t>> EvictionTracker::Top(size_t n) const {
  std::vector<std::pair<std::string, uint64_t>> all;
  {
    MutexLock l(&mu_);
    all.assign(bytes_.begin(), bytes_.end());
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (all.size() > n) all.resize(n);
  return all;
}

}  // namespace cairn::worker
