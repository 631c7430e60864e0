#include "client/metadata_cache.h"

#include <algorithm>
#include <utility>

namespace cairn::client {
namespace {

// Stat entries are keyed by the path; listing pages by path + '\0' + token, which never
// collides with a path (paths cannot hold NUL).
std::string ListKey(const std::string& path, std::string_view token) {
  std::string key = path;
  key += '\0';
  key += token;
  return key;
}

bool IsAtOrBelow(const std::string& key, std::string_view path) {
  std::string_view k(key);
  size_t nul = k.find('\0');
  if (nul != std::string_view::npos) k = k.substr(0, nul);
  if (path == "/") return true;
  return k == path ||
         (k.size() > path.size() && k.substr(0, path.size()) == path && k[path.size()] == '/');
}

}  // namespace

std::optional<StatusOr<FileInfo>> MetadataCache::GetStat(const std::string& path) {
  MutexLock l(&mu_);
  auto it = entries_.find(path);
  if (it == entries_.end() || it->second.expires_us <= clock_->NowMicros()) return std::nullopt;
  return it->second.stat;
}

void MetadataCache::PutStat(const std::string& path, const StatusOr<FileInfo>& info, int64_t ttl_us,
                            StatOrigin origin) {
  if (ttl_us <= 0) return;
  Entry e;
  const int64_t now = clock_->NowMicros();
  e.expires_us = now + ttl_us;
  if (origin == StatOrigin::kAsked) e.asked_us = now;
  e.stat = info;
  MutexLock l(&mu_);
  Insert(path, std::move(e));
}

bool MetadataCache::FreshlyAbsent(const std::string& path, int64_t max_age_us) {
  const int64_t now = clock_->NowMicros();
  MutexLock l(&mu_);
  auto it = entries_.find(path);
  if (it == entries_.end() || it->second.expires_us <= now) return false;
  const Entry& e = it->second;
  return e.stat.has_value() && !e.stat->ok() && e.stat->status().code() == StatusCode::kNotFound &&
         e.asked_us >= 0 && now - e.asked_us <= max_age_us;
}

std::optional<DirPage> MetadataCache::GetList(const std::string& path, std::string_view token) {
  MutexLock l(&mu_);
  auto it = entries_.find(ListKey(path, token));
  if (it == entries_.end() || it->second.expires_us <= clock_->NowMicros()) return std::nullopt;
  return it->second.list;
}

void MetadataCache::PutList(const std::string& path, std::string_view token, const DirPage& page,
                            int64_t ttl_us) {
  if (ttl_us <= 0) return;
  Entry e;
  e.expires_us = clock_->NowMicros() + ttl_us;
  e.list = page;
  MutexLock l(&mu_);
  Insert(ListKey(path, token), std::move(e));
}

void MetadataCache::Insert(const std::string& key, Entry entry) {
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    order_.erase(it->second.order);
    entries_.erase(it);
  }
  while (entries_.size() >= max_entries_ && !order_.empty()) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(key);
  entry.order = std::prev(order_.end());
  entries_.emplace(key, std::move(entry));
}

namespace {

// The folder holding `path` ("/" for a top-level name) and the name in it; an empty parent
// for "/" itself.
std::pair<std::string, std::string> SplitParent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (path == "/" || slash == std::string::npos) return {"", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

void MetadataCache::Invalidate(std::string_view path) {
  // The parent's listing pages too: they hold this path's stat (and whether it exists), and a
  // stat miss is answered from them.
  const std::string parent = SplitParent(std::string(path)).first;
  MutexLock l(&mu_);
  DropAtOrBelow(path);
  if (!parent.empty()) DropListings(parent);
}

void MetadataCache::DropAtOrBelow(std::string_view path) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (IsAtOrBelow(it->first, path)) {
      order_.erase(it->second.order);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void MetadataCache::DropListings(const std::string& dir) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool listing = it->second.list.has_value() &&
                         std::string_view(it->first).substr(0, it->first.find('\0')) == dir;
    if (listing) {
      order_.erase(it->second.order);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

bool MetadataCache::PatchParentListing(const std::string& parent, const std::string& name,
                                       const FileInfo* info) {
  const int64_t now = clock_->NowMicros();
  std::string token;
  // Each page holds the names after the previous page's last, up to its own last; the last page
  // holds everything after. Follow the chain from the first page to the one for `name`.
  for (size_t walked = 0; walked <= entries_.size(); ++walked) {
    auto it = entries_.find(ListKey(parent, token));
    if (it == entries_.end() || !it->second.list || it->second.expires_us <= now) return false;
    DirPage& page = *it->second.list;
    if (!page.next_token.empty() && (page.entries.empty() || page.entries.back().name < name)) {
      token = page.next_token;
      continue;
    }
    auto pos = std::lower_bound(page.entries.begin(), page.entries.end(), name,
                                [](const FileInfo& e, const std::string& n) { return e.name < n; });
    const bool there = pos != page.entries.end() && pos->name == name;
    if (there && pos->is_dir) return false;
    if (info == nullptr) {
      if (there) page.entries.erase(pos);
    } else if (there) {
      *pos = *info;
    } else {
      page.entries.insert(pos, *info);
    }
    return true;
  }
  return false;  // A cycle of tokens: not a listing to trust.
}

void MetadataCache::Forget(std::string_view path) {
  MutexLock l(&mu_);
  DropAtOrBelow(path);
}

MetadataCache::Listed MetadataCache::ListingShows(const std::string& dir, const std::string& name) {
  const int64_t now = clock_->NowMicros();
  std::string token;
  for (size_t walked = 0; walked <= entries_.size(); ++walked) {
    auto it = entries_.find(ListKey(dir, token));
    if (it == entries_.end() || !it->second.list || it->second.expires_us <= now) {
      return walked == 0 ? Listed::kNoListing : Listed::kNotShown;  // Part of it: not to trust.
    }
    const DirPage& page = *it->second.list;
    if (!page.next_token.empty() && (page.entries.empty() || page.entries.back().name < name)) {
      token = page.next_token;
      continue;
    }
    auto pos = std::lower_bound(page.entries.begin(), page.entries.end(), name,
                                [](const FileInfo& e, const std::string& n) { return e.name < n; });
    const bool shown = pos != page.entries.end() && pos->name == name && pos->is_dir;
    return shown ? Listed::kDirectory : Listed::kNotShown;
  }
  return Listed::kNotShown;  // A cycle of tokens: not a listing to trust.
}

void MetadataCache::NoteFoldersAbove(const std::string& path) {
  std::string dir = SplitParent(path).first;
  while (!dir.empty() && dir != "/") {
    if (auto it = entries_.find(dir); it != entries_.end() && it->second.stat &&
                                      !(it->second.stat->ok() && (*it->second.stat)->is_dir)) {
      order_.erase(it->second.order);
      entries_.erase(it);
    }
    auto [above, name] = SplitParent(dir);
    if (above.empty()) return;
    switch (ListingShows(above, name)) {
      case Listed::kDirectory:
        return;  // Known there already, and so is every folder above it.
      case Listed::kNotShown:
        DropListings(above);
        break;
      case Listed::kNoListing:
        break;
    }
    dir = above;
  }
}

void MetadataCache::NoteCommitted(const std::string& path, const FileInfo& info, int64_t ttl_us) {
  auto [parent, name] = SplitParent(path);
  FileInfo entry = info;
  entry.name = name;
  entry.is_dir = false;
  MutexLock l(&mu_);
  DropAtOrBelow(path);
  if (parent.empty()) return;
  NoteFoldersAbove(path);
  if (!PatchParentListing(parent, name, &entry)) DropListings(parent);
  if (ttl_us <= 0) return;
  Entry e;
  e.expires_us = clock_->NowMicros() + ttl_us;
  e.stat = entry;
  Insert(path, std::move(e));
}

void MetadataCache::NoteRemoved(const std::string& path, int64_t ttl_us) {
  auto [parent, name] = SplitParent(path);
  MutexLock l(&mu_);
  DropAtOrBelow(path);
  if (parent.empty()) return;
  if (!PatchParentListing(parent, name, nullptr)) DropListings(parent);
  if (ttl_us <= 0) return;
  Entry e;
  e.expires_us = clock_->NowMicros() + ttl_us;
  e.stat = StatusOr<FileInfo>(NotFoundError("no such file or directory: " + path));
  Insert(path, std::move(e));
}

std::shared_ptr<const MetadataSeed> MetadataCache::Export(size_t max_items) {
  auto seed = std::make_shared<MetadataSeed>();
  const int64_t now = clock_->NowMicros();
  MutexLock l(&mu_);
  seed->items.reserve(std::min(entries_.size(), max_items));
  for (auto it = order_.rbegin(); it != order_.rend() && seed->items.size() < max_items; ++it) {
    const Entry& e = entries_.at(*it);
    if (e.expires_us <= now) continue;
    seed->items.push_back({*it, e.expires_us, e.stat, e.list});
  }
  std::reverse(seed->items.begin(), seed->items.end());
  return seed;
}

void MetadataCache::Import(const MetadataSeed& seed) {
  const int64_t now = clock_->NowMicros();
  const size_t skip = seed.items.size() > max_entries_ ? seed.items.size() - max_entries_ : 0;
  MutexLock l(&mu_);
  for (size_t i = skip; i < seed.items.size(); ++i) {
    const MetadataSeed::Item& item = seed.items[i];
    if (item.expires_us <= now || (!item.stat && !item.list)) continue;
    Entry e;
    e.expires_us = item.expires_us;
    e.stat = item.stat;
    e.list = item.list;
    Insert(item.key, std::move(e));
  }
}

}  // namespace cairn::client
