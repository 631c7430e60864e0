#include "fuse/fake_client.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace cairn::fuse {
namespace {

constexpr std::string_view kTokenPrefix = "fake-after:";

std::string BaseName(const std::string& path) {
  return path == "/" ? std::string() : path.substr(path.rfind('/') + 1);
}

// Prefix shared by the keys of every descendant of `dir`.
std::string ChildPrefix(const std::string& dir) { return dir == "/" ? dir : dir + "/"; }

}  // namespace

Status ValidateClientPath(std::string_view path) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgumentError("path must be absolute: '" + std::string(path) + "'");
  }
  if (path == "/") return Status::Ok();
  if (path.back() == '/') {
    return InvalidArgumentError("path has a trailing slash: '" + std::string(path) + "'");
  }
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string_view::npos) {
      return InvalidArgumentError("malformed path: '" + std::string(path) + "'");
    }
    start = end + 1;
  }
  return Status::Ok();
}

// A reader pinned to the version (and bytes) seen at open.
class FakeClient::Reader : public FileReader {
 public:
  Reader(FakeClient* owner, std::string path, FileInfo info,
         std::shared_ptr<const std::string> content)
      : owner_(owner),
        path_(std::move(path)),
        info_(std::move(info)),
        content_(std::move(content)) {}

  const FileInfo& info() const override { return info_; }

  StatusOr<size_t> Read(uint64_t offset, std::span<char> out) override {
    {
      MutexLock lock(&owner_->mu_);
      CAIRN_RETURN_IF_ERROR(owner_->InjectedLocked(path_));
    }
    if (owner_->options_.fail_reads_after_change && owner_->LiveVersion(path_) != info_.version) {
      return FailedPreconditionError("object '" + path_ + "' changed since open (version " +
                                     info_.version + ")");
    }
    size_t n = 0;
    if (offset < content_->size()) {
      n = std::min<uint64_t>(out.size(), content_->size() - offset);
      if (owner_->options_.read_chunk_limit > 0) {
        n = std::min<size_t>(n, owner_->options_.read_chunk_limit);
      }
      std::memcpy(out.data(), content_->data() + offset, n);
    }
    owner_->CountRead(out.size(), n);
    return n;
  }

 private:
  FakeClient* const owner_;
  const std::string path_;
  const FileInfo info_;
  const std::shared_ptr<const std::string> content_;
};

FakeClient::FakeClient(FakeClientOptions options) : options_(options) {
  MutexLock lock(&mu_);
  nodes_["/"] = DirNode();
}

FakeClient::~FakeClient() = default;

Status FakeClient::EnsureDirsLocked(const std::string& path) {
  // Walk the ancestors from the top so that a file in the way is reported, not shadowed.
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    std::string dir = path.substr(0, slash);
    auto it = nodes_.find(dir);
    if (it == nodes_.end()) {
      nodes_[dir] = DirNode();
    } else if (!it->second.is_dir) {
      return FailedPreconditionError("'" + dir + "' is a file, not a directory");
    }
  }
  return Status::Ok();
}

Status FakeClient::PutFile(std::string_view path_view, std::string content, int64_t mtime_ns) {
  CAIRN_RETURN_IF_ERROR(ValidateClientPath(path_view));
  std::string path(path_view);
  if (path == "/") return InvalidArgumentError("cannot put a file at '/'");
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(EnsureDirsLocked(path));
  auto it = nodes_.find(path);
  if (it != nodes_.end() && it->second.is_dir) {
    return FailedPreconditionError("'" + path + "' is a directory");
  }
  Node& node = nodes_[path];
  node.is_dir = false;
  node.content = std::make_shared<const std::string>(std::move(content));
  node.version = "v" + std::to_string(next_version_++);
  node.mtime_ns = mtime_ns;
  return Status::Ok();
}

Status FakeClient::AddDir(std::string_view path_view) {
  CAIRN_RETURN_IF_ERROR(ValidateClientPath(path_view));
  std::string path(path_view);
  if (path == "/") return Status::Ok();
  MutexLock lock(&mu_);
  CAIRN_RETURN_IF_ERROR(EnsureDirsLocked(path));
  auto it = nodes_.find(path);
  if (it != nodes_.end()) {
    return it->second.is_dir ? Status::Ok() : FailedPreconditionError("'" + path + "' is a file");
  }
  nodes_[path] = DirNode();
  return Status::Ok();
}

Status FakeClient::Remove(std::string_view path_view) {
  CAIRN_RETURN_IF_ERROR(ValidateClientPath(path_view));
  std::string path(path_view);
  if (path == "/") return InvalidArgumentError("cannot remove '/'");
  MutexLock lock(&mu_);
  auto it = nodes_.find(path);
  if (it == nodes_.end()) return NotFoundError("no such path: '" + path + "'");
  const std::string prefix = path + "/";
  it = nodes_.erase(it);
  while (it != nodes_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    it = nodes_.erase(it);
  }
  return Status::Ok();
}

void FakeClient::InjectError(std::string_view path, Status status) {
  MutexLock lock(&mu_);
  if (status.ok()) {
    injected_.erase(std::string(path));
  } else {
    injected_[std::string(path)] = std::move(status);
  }
}

FakeClientCounters FakeClient::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

Status FakeClient::InjectedLocked(const std::string& path) const {
  auto it = injected_.find(path);
  return it == injected_.end() ? Status::Ok() : it->second;
}

std::string FakeClient::LiveVersion(const std::string& path) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(path);
  return it == nodes_.end() ? std::string() : it->second.version;
}

void FakeClient::CountRead(size_t span, size_t bytes) {
  MutexLock lock(&mu_);
  counters_.read_calls++;
  counters_.max_read_span = std::max(counters_.max_read_span, span);
  counters_.read_bytes += bytes;
}

StatusOr<FakeClient::CachedMeta> FakeClient::LookupLocked(const std::string& path) {
  const int64_t now = options_.clock->NowMicros();
  if (options_.metadata_ttl.count() > 0) {
    auto cached = meta_cache_.find(path);
    if (cached != meta_cache_.end() &&
        now - cached->second.fetched_micros < options_.metadata_ttl.count()) {
      metadata_hits_++;
      return cached->second;
    }
  }
  metadata_misses_++;
  auto it = nodes_.find(path);
  if (it == nodes_.end()) {
    meta_cache_.erase(path);
    return NotFoundError("no such path: '" + path + "'");
  }
  const Node& node = it->second;
  CachedMeta meta;
  meta.info.name = BaseName(path);
  meta.info.is_dir = node.is_dir;
  meta.info.size = node.is_dir ? 0 : node.content->size();
  meta.info.version = node.version;
  meta.info.mtime_ns = node.mtime_ns;
  meta.content = node.content;
  meta.fetched_micros = now;
  if (options_.metadata_ttl.count() > 0) meta_cache_[path] = meta;
  return meta;
}

StatusOr<FileInfo> FakeClient::Stat(std::string_view path_view) {
  CAIRN_RETURN_IF_ERROR(ValidateClientPath(path_view));
  std::string path(path_view);
  MutexLock lock(&mu_);
  counters_.stat_calls++;
  CAIRN_RETURN_IF_ERROR(InjectedLocked(path));
  CAIRN_ASSIGN_OR_RETURN(CachedMeta meta, LookupLocked(path));
  return meta.info;
}

StatusOr<DirPage> FakeClient::ListDir(std::string_view path_view, std::string_view token,
                                      int max_entries) {
  CAIRN_RETURN_IF_ERROR(ValidateClientPath(path_view));
  if (max_entries <= 0) return InvalidArgumentError("max_entries must be positive");
  std::string after;
  if (!token.empty()) {
    if (token.substr(0, kTokenPrefix.size()) != kTokenPrefix) {
      return InvalidArgumentError("malformed listing token");
    }
    after = std::string(token.substr(kTokenPrefix.size()));
  }
  std::string path(path_view);
  MutexLock lock(&mu_);
  counters_.list_calls++;
  counters_.max_list_entries_seen = std::max(counters_.max_list_entries_seen, max_entries);
  CAIRN_RETURN_IF_ERROR(InjectedLocked(path));
  auto dir = nodes_.find(path);
  if (dir == nodes_.end()) return NotFoundError("no such directory: '" + path + "'");
  if (!dir->second.is_dir) return InvalidArgumentError("not a directory: '" + path + "'");

  const std::string prefix = ChildPrefix(path);
  DirPage page;
  // Keys of one directory's children share `prefix`, so map order is name order; the
  // descendants of a child sort right after "<child>/", a range skipped by seeking to
  // "<child>0" ('0' follows '/').
  auto it = after.empty() ? nodes_.upper_bound(path) : nodes_.upper_bound(prefix + after);
  while (it != nodes_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    std::string rest = it->first.substr(prefix.size());
    size_t slash = rest.find('/');
    if (slash != std::string::npos) {
      it = nodes_.lower_bound(prefix + rest.substr(0, slash) + "0");
      continue;
    }
    if (static_cast<int>(page.entries.size()) == max_entries) {
      page.next_token = std::string(kTokenPrefix) + page.entries.back().name;
      break;
    }
    FileInfo info;
    info.name = rest;
    info.is_dir = it->second.is_dir;
    info.size = info.is_dir ? 0 : it->second.content->size();
    info.version = it->second.version;
    info.mtime_ns = it->second.mtime_ns;
    page.entries.push_back(std::move(info));
    ++it;
  }
  return page;
}

StatusOr<std::unique_ptr<FileReader>> FakeClient::Open(std::string_view path_view) {
  CAIRN_RETURN_IF_ERROR(ValidateClientPath(path_view));
  std::string path(path_view);
  CachedMeta meta;
  {
    MutexLock lock(&mu_);
    counters_.open_calls++;
    CAIRN_RETURN_IF_ERROR(InjectedLocked(path));
    CAIRN_ASSIGN_OR_RETURN(meta, LookupLocked(path));
  }
  if (meta.info.is_dir) return InvalidArgumentError("is a directory: '" + path + "'");
  return std::unique_ptr<FileReader>(
      std::make_unique<Reader>(this, path, std::move(meta.info), std::move(meta.content)));
}

void FakeClient::InvalidateMetadata(std::string_view path_view) {
  std::string path(path_view);
  MutexLock lock(&mu_);
  const std::string prefix = ChildPrefix(path);
  for (auto it = meta_cache_.begin(); it != meta_cache_.end();) {
    if (it->first == path || it->first.compare(0, prefix.size(), prefix) == 0) {
      it = meta_cache_.erase(it);
    } else {
      ++it;
    }
  }
}

ClientStats FakeClient::Stats() const {
  MutexLock lock(&mu_);
  ClientStats stats;
  stats.metadata_hits = metadata_hits_;
  stats.metadata_misses = metadata_misses_;
  return stats;
}

}  // namespace cairn::fuse
