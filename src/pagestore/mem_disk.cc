#include "pagestore/mem_disk.h"

#include <cstring>

#include "pagestore/page_format.h"

namespace cairn::pagestore {

struct MemDisk::State {
  struct File {
    std::shared_ptr<const std::string> data;
    uint32_t mode = 0600;
  };
  Mutex mu;
  std::map<std::string, File> files GUARDED_BY(mu);
  std::map<std::string, uint32_t> dirs GUARDED_BY(mu);  // path -> mode
  std::set<std::string> locks GUARDED_BY(mu);

  static std::string Parent(const std::string& path) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) return "/";
    return path.substr(0, slash);
  }
  bool ParentExists(const std::string& path) REQUIRES(mu) { return dirs.count(Parent(path)) > 0; }
};

namespace {

class MemFile final : public RandomAccessFile {
 public:
  explicit MemFile(std::shared_ptr<const std::string> data) : data_(std::move(data)) {}
  StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out) const override {
    if (offset >= data_->size()) return size_t{0};
    size_t n = std::min<uint64_t>(out.size(), data_->size() - offset);
    std::memcpy(out.data(), data_->data() + offset, n);
    return n;
  }
  StatusOr<uint64_t> Size() const override { return uint64_t{data_->size()}; }
  int native_fd() const override { return -1; }

 private:
  std::shared_ptr<const std::string> data_;
};

}  // namespace

class MemDiskLock final : public DiskLock {
 public:
  MemDiskLock(std::shared_ptr<MemDisk::State> state, std::string path)
      : state_(std::move(state)), path_(std::move(path)) {}
  ~MemDiskLock() override {
    MutexLock l(&state_->mu);
    state_->locks.erase(path_);
  }

 private:
  std::shared_ptr<MemDisk::State> state_;
  std::string path_;
};

MemDisk::MemDisk() : state_(std::make_shared<State>()) {
  MutexLock l(&state_->mu);
  state_->dirs["/"] = 0755;
}

Status MemDisk::CreateDir(const std::string& path) {
  MutexLock l(&state_->mu);
  if (state_->dirs.count(path)) return Status::Ok();
  if (state_->files.count(path)) {
    return FailedPreconditionError(path + " exists and is not a directory");
  }
  if (!state_->ParentExists(path)) return NotFoundError("mkdir " + path + ": no parent");
  state_->dirs[path] = 0700;
  return Status::Ok();
}

StatusOr<FileInfo> MemDisk::Stat(const std::string& path) {
  MutexLock l(&state_->mu);
  FileInfo info;
  if (auto it = state_->dirs.find(path); it != state_->dirs.end()) {
    info.is_dir = true;
    info.mode = it->second;
    return info;
  }
  if (auto it = state_->files.find(path); it != state_->files.end()) {
    info.is_regular = true;
    info.mode = it->second.mode;
    info.size = it->second.data->size();
    return info;
  }
  return NotFoundError("stat " + path);
}

Status MemDisk::CheckWritable(const std::string& path) {
  MutexLock l(&state_->mu);
  auto it = state_->dirs.find(path);
  if (it == state_->dirs.end()) return NotFoundError("access " + path);
  if ((it->second & 0300) != 0300) return PermissionDeniedError(path + " is not writable");
  return Status::Ok();
}

StatusOr<std::unique_ptr<RandomAccessFile>> MemDisk::OpenForRead(const std::string& path) {
  MutexLock l(&state_->mu);
  auto it = state_->files.find(path);
  if (it == state_->files.end()) return NotFoundError("open " + path);
  return std::unique_ptr<RandomAccessFile>(std::make_unique<MemFile>(it->second.data));
}

Status MemDisk::WriteNewFile(const std::string& path,
                             std::span<const std::span<const char>> pieces) {
  auto data = std::make_shared<std::string>();
  for (std::span<const char> piece : pieces) data->append(piece.data(), piece.size());
  MutexLock l(&state_->mu);
  if (state_->files.count(path) || state_->dirs.count(path)) {
    return AlreadyExistsError("create " + path);
  }
  if (!state_->ParentExists(path)) return NotFoundError("create " + path + ": no parent");
  state_->files[path] = State::File{std::move(data), 0600};
  return Status::Ok();
}

Status MemDisk::Rename(const std::string& from, const std::string& to) {
  MutexLock l(&state_->mu);
  auto it = state_->files.find(from);
  if (it == state_->files.end()) return NotFoundError("rename " + from);
  if (state_->dirs.count(to)) return FailedPreconditionError("rename over a directory " + to);
  if (!state_->ParentExists(to)) return NotFoundError("rename to " + to + ": no parent");
  State::File file = it->second;
  state_->files.erase(it);
  state_->files[to] = std::move(file);
  return Status::Ok();
}

Status MemDisk::Unlink(const std::string& path) {
  MutexLock l(&state_->mu);
  if (state_->files.erase(path) == 0) return NotFoundError("unlink " + path);
  return Status::Ok();
}

StatusOr<std::vector<DirEntry>> MemDisk::ListDir(const std::string& path) {
  MutexLock l(&state_->mu);
  if (!state_->dirs.count(path)) return NotFoundError("open directory " + path);
  std::string prefix = path == "/" ? "/" : path + "/";
  std::vector<DirEntry> out;
  auto add = [&](const std::string& p, bool is_dir, uint64_t size) {
    if (p.size() <= prefix.size() || p.compare(0, prefix.size(), prefix) != 0) return false;
    if (p.find('/', prefix.size()) == std::string::npos) {
      out.push_back(DirEntry{p.substr(prefix.size()), is_dir, !is_dir, size});
    }
    return true;
  };
  for (auto it = state_->dirs.upper_bound(prefix); it != state_->dirs.end(); ++it) {
    if (!add(it->first, true, 0)) break;
  }
  for (auto it = state_->files.lower_bound(prefix); it != state_->files.end(); ++it) {
    if (!add(it->first, false, it->second.data->size())) break;
  }
  return out;
}

StatusOr<uint64_t> MemDisk::FileSystemUsedBytes(const std::string& path) {
  MutexLock l(&state_->mu);
  uint64_t total = state_->dirs.size() * kPageAlignment;
  for (auto& [p, f] : state_->files) total += RoundUp(f.data->size(), kPageAlignment);
  return total;
}

StatusOr<std::unique_ptr<DiskLock>> MemDisk::LockFile(const std::string& path) {
  MutexLock l(&state_->mu);
  if (!state_->ParentExists(path)) return NotFoundError("open " + path + ": no parent");
  if (!state_->locks.insert(path).second) {
    return FailedPreconditionError(path + " is locked: the cache folder is in use");
  }
  if (!state_->files.count(path)) {
    state_->files[path] = State::File{std::make_shared<std::string>(), 0600};
  }
  return std::unique_ptr<DiskLock>(std::make_unique<MemDiskLock>(state_, path));
}

Status MemDisk::SetMode(const std::string& path, uint32_t mode) {
  MutexLock l(&state_->mu);
  if (auto it = state_->dirs.find(path); it != state_->dirs.end()) {
    it->second = mode;
    return Status::Ok();
  }
  if (auto it = state_->files.find(path); it != state_->files.end()) {
    it->second.mode = mode;
    return Status::Ok();
  }
  return NotFoundError("chmod " + path);
}

StatusOr<std::string> MemDisk::ReadFile(const std::string& path) const {
  MutexLock l(&state_->mu);
  auto it = state_->files.find(path);
  if (it == state_->files.end()) return NotFoundError("open " + path);
  return *it->second.data;
}

Status MemDisk::PutFile(const std::string& path, std::string contents) {
  MutexLock l(&state_->mu);
  if (!state_->ParentExists(path)) return NotFoundError("create " + path + ": no parent");
  state_->files[path] = State::File{std::make_shared<std::string>(std::move(contents)), 0600};
  return Status::Ok();
}

std::vector<std::string> MemDisk::ListAllFiles() const {
  MutexLock l(&state_->mu);
  std::vector<std::string> out;
  for (auto& [p, f] : state_->files) out.push_back(p);
  return out;
}

}  // namespace cairn::pagestore
