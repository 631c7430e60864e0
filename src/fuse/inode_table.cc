#include "fuse/inode_table.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

namespace cairn::fuse {

InodeTable::InodeTable() {
  MutexLock lock(&mu_);
  // The kernel never looks the root up and never forgets it; a count of 1 keeps it pinned.
  Node root;
  root.path = "/";
  root.is_dir = true;
  root.nlookup = 1;
  by_ino_[kRootIno] = std::move(root);
  by_path_["/"] = kRootIno;
}

uint64_t InodeTable::Ref(const std::string& path, bool is_dir) {
  MutexLock lock(&mu_);
  auto found = by_path_.find(path);
  if (found != by_path_.end()) {
    Node& node = by_ino_.at(found->second);
    if (node.is_dir == is_dir || found->second == kRootIno) {
      if (found->second != kRootIno) node.nlookup++;
      return found->second;
    }
    // Type changed: the old number keeps its remaining lookups but no longer owns the path.
  }
  const uint64_t ino = next_ino_++;
  Node& node = by_ino_[ino];
  node.path = path;
  node.is_dir = is_dir;
  node.nlookup = 1;
  by_path_[path] = ino;
  return ino;
}

void InodeTable::Forget(uint64_t ino, uint64_t n) {
  if (ino == kRootIno) return;
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) {
    spdlog::warn("fuse: FORGET of unknown inode {} (n={})", ino, n);
    return;
  }
  Node& node = it->second;
  if (n > node.nlookup) {
    spdlog::warn("fuse: FORGET of {} lookups for inode {} ('{}') that has only {}", n, ino,
                 node.path, node.nlookup);
  }
  node.nlookup = n >= node.nlookup ? 0 : node.nlookup - n;
  if (node.nlookup > 0) return;
  auto path_it = by_path_.find(node.path);
  if (path_it != by_path_.end() && path_it->second == ino) by_path_.erase(path_it);
  by_ino_.erase(it);
}

void InodeTable::Move(const std::string& from, const std::string& to) {
  auto at_or_below = [](const std::string& path, const std::string& top) {
    return path == top ||
           (path.size() > top.size() && path.starts_with(top) && path[top.size()] == '/');
  };
  MutexLock lock(&mu_);
  std::vector<std::pair<std::string, uint64_t>> moved;
  for (auto it = by_path_.begin(); it != by_path_.end();) {
    if (at_or_below(it->first, from)) {
      moved.emplace_back(to + it->first.substr(from.size()), it->second);
      it = by_path_.erase(it);
    } else if (at_or_below(it->first, to)) {
      it = by_path_.erase(it);  // Replaced: the kernel's references keep the old path.
    } else {
      ++it;
    }
  }
  for (auto& [path, ino] : moved) {
    by_ino_[ino].path = path;
    by_path_[path] = ino;
  }
}

std::optional<InodeTable::Entry> InodeTable::Get(uint64_t ino) const {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return std::nullopt;
  return Entry{.path = it->second.path, .is_dir = it->second.is_dir};
}

uint64_t InodeTable::Find(std::string_view path) const {
  MutexLock lock(&mu_);
  auto it = by_path_.find(std::string(path));
  return it == by_path_.end() ? 0 : it->second;
}

bool InodeTable::RecordOpenVersion(uint64_t ino, std::string_view version, bool* must_invalidate) {
  *must_invalidate = false;
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return false;
  Node& node = it->second;
  std::optional<std::string>& seen = node.open_version;
  // No open before: the kernel cannot hold pages of this inode (pages come from reads through
  // opens), so there is nothing to drop.
  const bool first = !seen.has_value();
  const bool same = !first && *seen == version;
  if (!same) {
    if (!first) ++node.version_epoch;
    seen = std::string(version);
  }
  const bool keep = same && !node.cache_tainted && node.invalidations == 0;
  node.cache_tainted = false;
  if (!keep && !first) {
    *must_invalidate = true;
    ++node.invalidations;
  }
  return keep;
}

bool InodeTable::NoteStatVersion(uint64_t ino, std::string_view version) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return false;
  std::optional<std::string>& seen = it->second.open_version;
  if (!seen.has_value() || *seen == version) return false;
  seen = std::string(version);
  ++it->second.version_epoch;
  it->second.cache_tainted = true;
  ++it->second.invalidations;
  return true;
}

uint64_t InodeTable::VersionEpoch(uint64_t ino) const {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  return it == by_ino_.end() ? 0 : it->second.version_epoch;
}

void InodeTable::AddHandle(uint64_t ino, uint64_t epoch) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end()) ++it->second.handles_by_epoch[epoch];
}

void InodeTable::RemoveHandle(uint64_t ino, uint64_t epoch) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return;
  auto h = it->second.handles_by_epoch.find(epoch);
  if (h != it->second.handles_by_epoch.end() && --h->second == 0) {
    it->second.handles_by_epoch.erase(h);
  }
}

bool InodeTable::HasHandlesBefore(uint64_t ino, uint64_t epoch) const {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end() || it->second.handles_by_epoch.empty()) return false;
  return it->second.handles_by_epoch.begin()->first < epoch;
}

void InodeTable::TaintCache(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end()) it->second.cache_tainted = true;
}

void InodeTable::BeginInvalidation(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return;
  it->second.cache_tainted = true;
  ++it->second.invalidations;
}

void InodeTable::InvalidationDone(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end() && it->second.invalidations > 0) --it->second.invalidations;
}

void InodeTable::RecordReportedSize(uint64_t ino, uint64_t size) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end()) it->second.reported_size = size;
}

std::optional<uint64_t> InodeTable::ReportedSize(uint64_t ino) const {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return std::nullopt;
  return it->second.reported_size;
}

uint64_t InodeTable::LookupCount(uint64_t ino) const {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  return it == by_ino_.end() ? 0 : it->second.nlookup;
}

size_t InodeTable::size() const {
  MutexLock lock(&mu_);
  return by_ino_.size();
}

}  // namespace cairn::fuse
