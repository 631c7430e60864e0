// PageRules: what the cluster's cache-management rules (policy::PathRules, from etcd) mean for
// one page on this worker. Maps a page's object id (the mount's source URI + '/' + key) back to
// its namespace path through the current mount table, resolves the rules there, and turns them
// into the eviction engine's hints: group (the mount), priority, pin, TTL deadline. Also answers
// the admission of a read (bypass: serve without caching).
//
// Thread-safety: thread-safe; SetRules/SetMounts swap immutable snapshots under a mutex.
#ifndef CAIRN_WORKER_PAGE_RULES_H_
#define CAIRN_WORKER_PAGE_RULES_H_

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "metrics/registry.h"
#include "mount/mount_table.h"
#include "pagestore/page_store.h"
#include "policy/eviction_policy.h"
#include "policy/path_rules.h"

namespace cairn::worker {

// The eviction group of a mount: a stable 32-bit hash of its namespace path.
uint32_t MountGroup(std::string_view mount_path);

// Keeps one `cairn_mount_cached_bytes{mount=...}` gauge per mount of `mounts` (the page store's
// bytes of that mount's group), removing those of mounts no longer in the table. `exported`
// remembers what was registered (the caller serialises calls).
void ExportMountGauges(metrics::Registry* registry, pagestore::PageStore* store,
                       const mount::MountTable& mounts, std::set<std::string>* exported);

class PageRules {
 public:
  explicit PageRules(Clock* clock) : clock_(clock) {}

  void SetRules(std::shared_ptr<const policy::PathRules> rules) EXCLUDES(mu_);
  void SetMounts(std::shared_ptr<const mount::MountTable> mounts) EXCLUDES(mu_);
  std::shared_ptr<const policy::PathRules> rules() const EXCLUDES(mu_);

  // The hints of a page being cached now (TTL deadline = now + the rule's TTL). A page of no
  // known mount gets default hints in group 0.
  policy::EntryHints HintsFor(std::string_view object_id) const EXCLUDES(mu_);

  // Where a page's object lives: its mount path and key ("/lake", "train/a.jpg"); false if no
  // mount of the current table holds it.
  bool Locate(std::string_view object_id, std::string* mount_path, std::string* key) const
      EXCLUDES(mu_);

  // The admission rule of a read of `key` in the mount at `mount_path`.
  policy::Admission AdmissionFor(std::string_view mount_path, std::string_view key) const
      EXCLUDES(mu_);

  // The priority of a page written through Cairn to `key` in the mount at `mount_path`: low
  // (a checkpoint must not flush the training set), unless a rule covering the path sets one
  // (policy::ResolvedRule::priority_set).
  policy::Priority WrittenPriority(std::string_view mount_path, std::string_view key) const
      EXCLUDES(mu_);

  // Whether any rule is set (a worker with none skips the lookups).
  bool empty() const EXCLUDES(mu_);

 private:
  Clock* const clock_;
  mutable Mutex mu_;
  std::shared_ptr<const policy::PathRules> rules_ GUARDED_BY(mu_) =
      std::make_shared<const policy::PathRules>();
  std::shared_ptr<const mount::MountTable> mounts_ GUARDED_BY(mu_);
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_PAGE_RULES_H_
