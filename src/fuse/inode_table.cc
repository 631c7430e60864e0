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
  return NewNumber(path, is_dir);
}

uint64_t InodeTable::RefFile(const std::string& path, const FileInfo& info, bool writing) {
  MutexLock lock(&mu_);
  auto found = by_path_.find(path);
  if (found != by_path_.end() && found->second != kRootIno) {
    Node& node = by_ino_.at(found->second);
    if (!node.is_dir &&
        (writing || (node.shown && node.shown->version == info.version) || Adopt(&node, info))) {
      node.nlookup++;
      return found->second;
    }
    // Another type or another version: the old number keeps its lookups and what it shows.
  }
  const uint64_t ino = NewNumber(path, /*is_dir=*/false);
  if (!writing) by_ino_.at(ino).shown = info;
  return ino;
}

uint64_t InodeTable::RefNewFile(const std::string& path) {
  MutexLock lock(&mu_);
  return NewNumber(path, /*is_dir=*/false);
}

uint64_t InodeTable::NewNumber(const std::string& path, bool is_dir) {
  const uint64_t ino = next_ino_++;
  Node& node = by_ino_[ino];
  node.path = path;
  node.is_dir = is_dir;
  node.nlookup = 1;
  by_path_[path] = ino;
  return ino;
}

bool InodeTable::Adopt(Node* node, const FileInfo& info) {
  if (node->shown || node->readers > 0 || node->writers > 0) return false;
  node->shown = info;
  // The pages the kernel holds (if any) are this mount's writes: probably this version's
  // bytes, but only a drop makes sure (another mount may have written it since).
  node->cache_unverified = true;
  return true;
}

FileInfo InodeTable::Shown(uint64_t ino, const FileInfo& current, bool writing) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end() || it->second.is_dir || writing) return current;
  Node& node = it->second;
  if (!node.shown) {
    Adopt(&node, current);
    return current;
  }
  if (node.shown->version == current.version) return current;
  return *node.shown;
}

InodeTable::ReaderOpen InodeTable::OpenReader(uint64_t ino, const FileInfo& opened) {
  ReaderOpen open;
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end() || it->second.is_dir) {
    open.stale = true;
    return open;
  }
  Node& node = it->second;
  if (!node.shown && node.writers > 0) {
    // Read while this mount writes the file: the reader is pinned to what the source has, the
    // kernel shows the writes; nothing in the cache can be trusted.
    ++node.readers;
    return open;
  }
  if (!(node.shown && node.shown->version == opened.version) && !Adopt(&node, opened)) {
    open.stale = true;
    return open;
  }
  ++node.readers;
  if (node.cache_unverified) {
    node.cache_unverified = false;
    open.must_invalidate = true;
    ++node.invalidations;
  }
  // While another open's drop is in flight, pages it is dropping could still be read.
  open.keep_cache = !open.must_invalidate && node.invalidations == 0;
  open.size_changed = node.reported_size.has_value() && *node.reported_size != opened.size;
  return open;
}

void InodeTable::CloseReader(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end() && it->second.readers > 0) --it->second.readers;
}

void InodeTable::OpenWriter(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return;
  ++it->second.writers;
  it->second.shown.reset();
}

void InodeTable::CloseWriter(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end() && it->second.writers > 0) --it->second.writers;
}

void InodeTable::Unfix(uint64_t ino) {
  MutexLock lock(&mu_);
  auto it = by_ino_.find(ino);
  if (it != by_ino_.end() && !it->second.is_dir) it->second.shown.reset();
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
