#include "pagestore/page_attributes.h"

#include <algorithm>
#include <utility>

#include "common/checksum.h"

namespace cairn::pagestore {

std::string_view ObjectIdOfKey(std::string_view serialized_key) {
  return serialized_key.substr(0, serialized_key.find('\0'));
}

AttributeSource::AttributeSource(AttributeResolver resolver) { Set(std::move(resolver)); }

void AttributeSource::Set(AttributeResolver resolver) {
  std::shared_ptr<const AttributeResolver> next;
  if (resolver) next = std::make_shared<const AttributeResolver>(std::move(resolver));
  {
    MutexLock l(&mu_);
    resolver_.swap(next);
  }
  MarkRulesChanged();
  // `next` now holds the old resolver; it dies here unless a call in flight still holds it.
}

policy::EntryHints AttributeSource::Resolve(std::string_view object_id) const {
  std::shared_ptr<const AttributeResolver> resolver;
  {
    MutexLock l(&mu_);
    resolver = resolver_;
  }
  if (!resolver) return {};
  policy::EntryHints hints = (*resolver)(object_id);
  hints.cold = false;  // The store decides that (pages found on disk at startup).
  return hints;
}

std::shared_ptr<const std::string> ObjectIdInterner::Intern(std::string_view object_id) {
  const uint64_t h = Hash64(object_id);
  auto [first, last] = table_.equal_range(h);
  for (auto it = first; it != last; ++it) {
    std::shared_ptr<const std::string> live = it->second.lock();
    if (live && *live == object_id) return live;
  }
  if (table_.size() >= purge_at_) {
    Purge();
    // Next purge when the table has doubled again over what is live: O(1) amortized per call.
    purge_at_ = std::max<size_t>(1024, 2 * table_.size());
  }
  // Not make_shared: the string's memory must go with the last page, not with the last weak
  // reference (a make_shared block lives until the table slot is purged).
  std::shared_ptr<const std::string> fresh(new std::string(object_id));
  // Reuse a dead slot of the same hash, if any, rather than adding one.
  auto [f, l] = table_.equal_range(h);
  for (auto it = f; it != l; ++it) {
    if (it->second.expired()) {
      it->second = fresh;
      return fresh;
    }
  }
  table_.emplace(h, fresh);
  return fresh;
}

void ObjectIdInterner::Purge() {
  for (auto it = table_.begin(); it != table_.end();) {
    it = it->second.expired() ? table_.erase(it) : std::next(it);
  }
}

}  // namespace cairn::pagestore
