#include "worker/page_rules.h"

#include <limits>

#include "common/checksum.h"

namespace cairn::worker {

uint32_t MountGroup(std::string_view mount_path) {
  return static_cast<uint32_t>(Checksum64({mount_path.data(), mount_path.size()}));
}

void ExportMountGauges(metrics::Registry* registry, pagestore::PageStore* store,
                       const mount::MountTable& mounts, std::set<std::string>* exported) {
  std::set<std::string> now;
  for (const auto& m : mounts.mounts()) {
    const std::string& path = m->spec.path;
    now.insert(path);
    if (exported->count(path)) continue;
    uint32_t group = MountGroup(path);
    registry->AddCallback(
        "cairn_mount_cached_bytes", "Bytes of cached pages, by mount", metrics::MetricType::kGauge,
        [store, group] { return double(store->GroupBytes(group)); }, {{"mount", path}});
  }
  for (const std::string& old : *exported) {
    if (!now.count(old)) registry->RemoveCallback("cairn_mount_cached_bytes", {{"mount", old}});
  }
  *exported = std::move(now);
}

void PageRules::SetRules(std::shared_ptr<const policy::PathRules> rules) {
  MutexLock l(&mu_);
  rules_ = std::move(rules);
}

void PageRules::SetMounts(std::shared_ptr<const mount::MountTable> mounts) {
  MutexLock l(&mu_);
  mounts_ = std::move(mounts);
}

std::shared_ptr<const policy::PathRules> PageRules::rules() const {
  MutexLock l(&mu_);
  return rules_;
}

bool PageRules::empty() const {
  MutexLock l(&mu_);
  return rules_->empty();
}

policy::EntryHints PageRules::HintsFor(std::string_view object_id) const {
  policy::EntryHints hints;
  std::string mount_path, key;
  if (!Locate(object_id, &mount_path, &key)) return hints;
  hints.group = MountGroup(mount_path);
  std::shared_ptr<const policy::PathRules> rules = this->rules();
  if (rules->empty()) return hints;
  std::string path = mount_path == "/" ? "/" + key : mount_path + "/" + key;
  policy::ResolvedRule r = rules->Resolve(path);
  hints.pinned = r.pin;
  hints.priority = r.admission == policy::Admission::kLow ? policy::Priority::kLow : r.priority;
  if (r.ttl_ms > 0) {
    // Saturate: a deadline past int64 is "never" in practice, and overflowing it is undefined.
    int64_t ttl_us = 0;
    int64_t at = 0;
    if (__builtin_mul_overflow(r.ttl_ms, int64_t{1000}, &ttl_us) ||
        __builtin_add_overflow(clock_->NowMicros(), ttl_us, &at)) {
      at = std::numeric_limits<int64_t>::max();
    }
    hints.expires_at_us = at;
  }
  return hints;
}

bool PageRules::Locate(std::string_view object_id, std::string* mount_path,
                       std::string* key) const {
  std::shared_ptr<const mount::MountTable> mounts;
  {
    MutexLock l(&mu_);
    mounts = mounts_;
  }
  if (!mounts) return false;
  for (const auto& m : mounts->mounts()) {
    const std::string& prefix = m->object_id_prefix;
    if (object_id.size() > prefix.size() && object_id.compare(0, prefix.size(), prefix) == 0 &&
        object_id[prefix.size()] == '/') {
      *mount_path = m->spec.path;
      *key = std::string(object_id.substr(prefix.size() + 1));
      return true;
    }
  }
  return false;
}

namespace {

std::string NamespacePath(std::string_view mount_path, std::string_view key) {
  return mount_path == "/" ? "/" + std::string(key)
                           : std::string(mount_path) + "/" + std::string(key);
}

}  // namespace

policy::Admission PageRules::AdmissionFor(std::string_view mount_path, std::string_view key) const {
  std::shared_ptr<const policy::PathRules> rules = this->rules();
  if (rules->empty()) return policy::Admission::kNormal;
  return rules->Resolve(NamespacePath(mount_path, key)).admission;
}

policy::Priority PageRules::WrittenPriority(std::string_view mount_path,
                                            std::string_view key) const {
  std::shared_ptr<const policy::PathRules> rules = this->rules();
  if (rules->empty()) return policy::Priority::kLow;
  policy::ResolvedRule r = rules->Resolve(NamespacePath(mount_path, key));
  if (!r.priority_set) return policy::Priority::kLow;
  return r.admission == policy::Admission::kLow ? policy::Priority::kLow : r.priority;
}

}  // namespace cairn::worker
