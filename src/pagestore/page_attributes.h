// What the page store needs to apply cache rules to pages: the replaceable AttributeResolver
// (AttributeSource) and one shared copy of each object id per folder (ObjectIdInterner).
//
// Thread-safety: AttributeSource is thread-safe. ObjectIdInterner is not: its owner serializes
// calls (a CacheDir calls it under its mutex); the strings it hands out are immutable and may be
// read and released from any thread.
#ifndef CAIRN_PAGESTORE_PAGE_ATTRIBUTES_H_
#define CAIRN_PAGESTORE_PAGE_ATTRIBUTES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.h"
#include "pagestore/page_store.h"
#include "policy/eviction_policy.h"

namespace cairn::pagestore {

// The object id part of a serialized page key (PageKey::Serialize: object_id '\0' version '\0'
// index): everything before the first NUL, or the whole input if there is none.
std::string_view ObjectIdOfKey(std::string_view serialized_key);

// Holds the store's resolver, shared by its folders, so that it can be replaced while they call
// it, and counts rule changes so that a page filed while the rules changed can be refiled.
class AttributeSource {
 public:
  explicit AttributeSource(AttributeResolver resolver);

  // Replaces the resolver (empty: default hints) and bumps epoch(). Calls in flight keep using
  // the one they started with: it lives until they return.
  void Set(AttributeResolver resolver) EXCLUDES(mu_);

  // The hints for `object_id` (cold always false), from the resolver in place now; default hints
  // without one. Calls the resolver with no lock of this class held.
  policy::EntryHints Resolve(std::string_view object_id) const EXCLUDES(mu_);

  // Bumped by Set and by MarkRulesChanged (at the start of a Reattribute). A caller that read
  // epoch() before Resolve and sees another value after filing a page must resolve it again: the
  // pass that applies the new rules may have walked past it before it was filed.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  void MarkRulesChanged() { epoch_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  mutable Mutex mu_;
  std::shared_ptr<const AttributeResolver> resolver_ GUARDED_BY(mu_);  // Null: none.
  std::atomic<uint64_t> epoch_{0};
};

// Hands out one shared immutable string per distinct object id, so the pages of an object (and
// an index entry per page) cost one pointer each rather than a copy of the id. The table holds
// weak references: a string is freed when the last page of its object is dropped, and the stale
// slot is purged later (amortized O(1) per call).
class ObjectIdInterner {
 public:
  // The shared copy of `object_id` (made now if no live one exists).
  std::shared_ptr<const std::string> Intern(std::string_view object_id);

  // Slots in the table, live or stale (for tests).
  size_t table_size() const { return table_.size(); }

 private:
  // Drops the slots whose string died.
  void Purge();

  // Keyed by Hash64 of the id; collisions are told apart by comparing the strings.
  std::unordered_multimap<uint64_t, std::weak_ptr<const std::string>> table_;
  size_t purge_at_ = 1024;  // Purge when the table reaches this many slots.
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_PAGE_ATTRIBUTES_H_
