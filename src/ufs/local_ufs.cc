#include "ufs/local_ufs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

#include "common/thread_annotations.h"
#include "ufs/local_stat.h"
#include "ufs/ufs_keys.h"

namespace cairn::ufs {
namespace {

// Splits "a/b/c" into {"a/b", "c"} and "c" into {"", "c"}.
std::pair<std::string_view, std::string_view> SplitParent(std::string_view key) {
  size_t slash = key.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string TempName() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(kLocalTempPrefix) + buf;
}

}  // namespace

std::string LocalVersion(uint64_t size, int64_t mtime_ns) {
  return std::to_string(size) + "-" + std::to_string(mtime_ns);
}

namespace internal {

ObjectInfo LocalInfoFromStat(const struct stat& st) {
  ObjectInfo info;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  info.version = LocalVersion(info.size, info.mtime_ns);
  return info;
}

}  // namespace internal

StatusOr<std::unique_ptr<LocalUnderStorage>> LocalUnderStorage::Open(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return InvalidArgumentError("local root must be an absolute path, got '" + path + "'");
  }
  std::string normalized = path;
  while (normalized.size() > 1 && normalized.back() == '/') normalized.pop_back();
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<RootDir> root, RootDir::Open(normalized));
  return std::unique_ptr<LocalUnderStorage>(new LocalUnderStorage(std::move(root)));
}

std::string LocalUnderStorage::RootUri() const { return "file://" + root_->path(); }

StatusOr<ObjectInfo> LocalUnderStorage::Stat(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  StatusOr<UniqueFd> fd = root_->OpenBeneath(key, O_PATH);
  if (!fd.ok()) {
    if (fd.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no such object '" + std::string(key) + "' in " + RootUri());
    }
    return fd.status();
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoToStatus(errno, "stat " + std::string(key));
  if (!S_ISREG(st.st_mode)) {
    return NotFoundError("'" + std::string(key) + "' in " + RootUri() +
                         (S_ISDIR(st.st_mode) ? " is a folder" : " is not a regular file") +
                         ", not an object");
  }
  ObjectInfo info = internal::LocalInfoFromStat(st);
  info.key = std::string(key);
  return info;
}

StatusOr<size_t> LocalUnderStorage::Read(std::string_view key, std::string_view expected_version,
                                         uint64_t offset, std::span<char> out) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  // O_NONBLOCK keeps a FIFO planted under the root from blocking the open; it changes nothing
  // for regular files.
  StatusOr<UniqueFd> fd = root_->OpenBeneath(key, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd.ok()) {
    if (fd.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no such object '" + std::string(key) + "' in " + RootUri());
    }
    return fd.status();
  }
  auto check_version = [&]() -> Status {
    struct stat st;
    if (::fstat(fd->get(), &st) != 0) return ErrnoToStatus(errno, "stat " + std::string(key));
    if (!S_ISREG(st.st_mode)) {
      return NotFoundError("'" + std::string(key) + "' in " + RootUri() + " is not a file");
    }
    if (expected_version.empty()) return Status::Ok();
    std::string version = internal::LocalInfoFromStat(st).version;
    if (version != expected_version) {
      return FailedPreconditionError("object '" + std::string(key) + "' in " + RootUri() +
                                     " changed: expected version " + std::string(expected_version) +
                                     ", found " + version);
    }
    return Status::Ok();
  };
  CAIRN_RETURN_IF_ERROR(check_version());
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd->get(), out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read " + root_->path() + "/" + std::string(key));
    }
    if (n == 0) break;  // End of file.
    done += static_cast<size_t>(n);
  }
  if (!expected_version.empty()) CAIRN_RETURN_IF_ERROR(check_version());
  return done;
}

class LocalUnderStorage::Writer : public ObjectWriter {
 public:
  Writer(const LocalUnderStorage* store, std::string key, PartLayout layout,
         WriteCondition condition)
      : store_(store),
        key_(std::move(key)),
        where_(store->root_->path() + "/" + key_),
        condition_(std::move(condition)),
        layout_(layout),
        ledger_(layout) {}

  ~Writer() override {
    MutexLock lock(&mu_);
    Discard();
  }

  const PartLayout& layout() const override { return layout_; }

  Status WritePart(uint32_t index, std::span<const char> data) override {
    int fd;
    {
      MutexLock lock(&mu_);
      CAIRN_RETURN_IF_ERROR(CheckOpen());
      CAIRN_RETURN_IF_ERROR(ledger_.CheckFullPart(index, data.size()));
      CAIRN_RETURN_IF_ERROR(EnsureTempFile());
      fd = file_.get();
    }
    // Outside the lock: parts go to disjoint ranges, and Commit/Abort do not overlap WritePart.
    CAIRN_RETURN_IF_ERROR(PwriteAll(fd, data, layout().Offset(index)));
    MutexLock lock(&mu_);
    ledger_.Record(index, data.size());
    return Status::Ok();
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    MutexLock lock(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
    CAIRN_ASSIGN_OR_RETURN(uint32_t count, ledger_.CheckCommit(size, tail.size()));
    CAIRN_RETURN_IF_ERROR(EnsureTempFile());
    const uint64_t tail_start = count == 0 ? 0 : layout().Offset(count - 1);
    CAIRN_RETURN_IF_ERROR(PwriteAll(file_.get(), tail, tail_start));
    // The final part may end before the end of a full part written earlier at its index.
    if (::ftruncate(file_.get(), static_cast<off_t>(size)) != 0) {
      return ErrnoToStatus(errno, "truncate " + where_);
    }
    if (::fsync(file_.get()) != 0) return ErrnoToStatus(errno, "fsync " + where_);
    CAIRN_RETURN_IF_ERROR(PutInPlace());
    committed_ = true;
    // Makes the new name itself durable. The file is in place from here: a failure is marked.
    if (::fsync(dir_.get()) != 0) {
      return ErrnoToStatus(errno, "fsync folder of " + where_).WithOutcomeUnknown();
    }
    struct stat st;
    if (::fstat(file_.get(), &st) != 0) {
      return ErrnoToStatus(errno, "stat " + where_).WithOutcomeUnknown();
    }
    ObjectInfo info = internal::LocalInfoFromStat(st);
    info.key = key_;
    file_ = UniqueFd();
    return info;
  }

  void SetCondition(WriteCondition condition) override { condition_ = std::move(condition); }

  std::string UploadToken() const override {
    MutexLock lock(&mu_);
    return tmp_;
  }

  Status Begin() override {
    MutexLock lock(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
    return EnsureTempFile();
  }

  Status Abort() override {
    MutexLock lock(&mu_);
    if (committed_) return FailedPreconditionError("write of " + where_ + " already committed");
    Discard();
    aborted_ = true;
    return Status::Ok();
  }

 private:
  Status CheckOpen() const REQUIRES(mu_) {
    if (committed_ || aborted_) {
      return FailedPreconditionError("write of " + where_ + " already " +
                                     (committed_ ? "committed" : "aborted"));
    }
    return Status::Ok();
  }

  Status EnsureTempFile() REQUIRES(mu_) {
    if (file_.valid()) return Status::Ok();
    auto [parent, name] = SplitParent(key_);
    CAIRN_ASSIGN_OR_RETURN(dir_, store_->root_->MakeDirs(parent));
    name_ = std::string(name);
    tmp_ = TempName();
    int raw = ::openat(dir_.get(), tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (raw < 0) return ErrnoToStatus(errno, "create temp file for " + where_);
    file_ = UniqueFd(raw);
    return Status::Ok();
  }

  // Moves the synced temp file to the key, honouring the condition. The temp name is gone
  // afterwards on success.
  Status PutInPlace() REQUIRES(mu_) {
    switch (condition_.kind) {
      case WriteCondition::Kind::kAbsent:
        // link(2) fails with EEXIST if the key exists: an atomic exclusive create.
        if (::linkat(dir_.get(), tmp_.c_str(), dir_.get(), name_.c_str(), 0) != 0) {
          if (errno == EEXIST) return AlreadyExistsError(where_ + " already exists");
          return RenameError(errno);
        }
        ::unlinkat(dir_.get(), tmp_.c_str(), 0);
        tmp_.clear();
        return Status::Ok();
      case WriteCondition::Kind::kVersion: {
        struct stat st;
        std::string found = "deleted";
        if (::fstatat(dir_.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          found =
              S_ISREG(st.st_mode) ? "now " + internal::LocalInfoFromStat(st).version : "not a file";
        }
        if (found != "now " + condition_.version) {
          return FailedPreconditionError(where_ + " is no longer version " + condition_.version +
                                         " (" + found + ")");
        }
        [[fallthrough]];
      }
      case WriteCondition::Kind::kNone:
        if (::renameat(dir_.get(), tmp_.c_str(), dir_.get(), name_.c_str()) != 0) {
          return RenameError(errno);
        }
        tmp_.clear();
        return Status::Ok();
    }
    return InternalError("unknown write condition");
  }

  Status RenameError(int err) const {
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST || err == EPERM) {
      return FailedPreconditionError(where_ + " is a folder; cannot write an object there");
    }
    if (err == ENAMETOOLONG) return InvalidArgumentError("name too long: " + where_);
    return ErrnoToStatus(err, "put " + where_ + " in place");
  }

  // Removes the temp file, if any.
  void Discard() REQUIRES(mu_) {
    if (!tmp_.empty()) ::unlinkat(dir_.get(), tmp_.c_str(), 0);
    tmp_.clear();
    file_ = UniqueFd();
  }

  Status PwriteAll(int fd, std::span<const char> data, uint64_t offset) const {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n =
          ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, "write " + where_);
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  const LocalUnderStorage* const store_;
  const std::string key_;
  const std::string where_;  // Absolute path, for messages.
  WriteCondition condition_;
  const PartLayout layout_;
  mutable Mutex mu_;
  PartLedger ledger_ GUARDED_BY(mu_);
  UniqueFd dir_ GUARDED_BY(mu_);   // The key's folder, once the temp file exists.
  UniqueFd file_ GUARDED_BY(mu_);  // The temp file, open for writing.
  std::string name_ GUARDED_BY(mu_);
  std::string tmp_ GUARDED_BY(mu_);  // Temp file name in dir_; empty when there is none.
  bool committed_ GUARDED_BY(mu_) = false;
  bool aborted_ GUARDED_BY(mu_) = false;
};

StatusOr<std::unique_ptr<ObjectWriter>> LocalUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  if (SplitParent(key).second.starts_with(kLocalTempPrefix)) {
    return InvalidArgumentError("key '" + std::string(key) + "' uses the reserved name prefix " +
                                std::string(kLocalTempPrefix));
  }
  CAIRN_ASSIGN_OR_RETURN(PartLayout layout, PartLayout::Create(options.part_size));
  return std::unique_ptr<ObjectWriter>(
      std::make_unique<Writer>(this, std::string(key), layout, options.condition));
}

Status LocalUnderStorage::AbortUpload(std::string_view key, std::string_view token) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  if (!token.starts_with(kLocalTempPrefix) || token.find('/') != std::string_view::npos ||
      token.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("not a temp file of this store: '" + std::string(token) + "'");
  }
  StatusOr<UniqueFd> dir = root_->OpenBeneath(SplitParent(key).first, O_RDONLY | O_DIRECTORY);
  if (!dir.ok()) return dir.status().code() == StatusCode::kNotFound ? Status::Ok() : dir.status();
  const std::string temp(token);
  if (::unlinkat(dir->get(), temp.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, "remove the temp file " + temp + " of " + std::string(key));
  }
  return Status::Ok();
}

Status LocalUnderStorage::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  auto [parent, name] = SplitParent(key);
  std::string name_str(name);
  StatusOr<UniqueFd> dir = root_->OpenBeneath(parent, O_RDONLY | O_DIRECTORY);
  auto not_found = [&](std::string_view why) {
    return NotFoundError("no such object '" + std::string(key) + "' in " + RootUri() +
                         std::string(why));
  };
  if (!dir.ok()) {
    if (dir.status().code() == StatusCode::kNotFound) return not_found("");
    return dir.status();
  }
  if (::unlinkat(dir->get(), name_str.c_str(), 0) != 0) {
    int err = errno;
    if (err == ENOENT) return not_found("");
    if (err == EISDIR) return not_found(" (it is a folder)");
    return ErrnoToStatus(err, "delete " + root_->path() + "/" + std::string(key));
  }
  return Status::Ok();
}

namespace {

// The folder holding `key`, opened below the root; NotFound names the key.
StatusOr<UniqueFd> OpenParent(const RootDir& root, std::string_view key, const std::string& uri) {
  StatusOr<UniqueFd> dir = root.OpenBeneath(SplitParent(key).first, O_RDONLY | O_DIRECTORY);
  if (!dir.ok() && dir.status().code() == StatusCode::kNotFound) {
    return NotFoundError("no folder for '" + std::string(key) + "' in " + uri);
  }
  return dir;
}

Status SyncFolder(const UniqueFd& dir, const std::string& where) {
  if (::fsync(dir.get()) != 0) return ErrnoToStatus(errno, "fsync folder of " + where);
  return Status::Ok();
}

}  // namespace

StatusOr<ObjectInfo> LocalUnderStorage::Rename(std::string_view from, std::string_view to,
                                               const RenameOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(from));
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(to));
  const std::string where = root_->path() + "/" + std::string(from);
  if (from == to) return InvalidArgumentError("rename of " + where + " onto itself");
  if (to.starts_with(std::string(from) + "/")) {
    return InvalidArgumentError("rename of " + where + " into itself");
  }
  if (options.condition.kind == WriteCondition::Kind::kVersion) {
    return InvalidArgumentError("a rename takes no version condition on its destination");
  }
  CAIRN_ASSIGN_OR_RETURN(UniqueFd from_dir, OpenParent(*root_, from, RootUri()));
  const std::string from_name(SplitParent(from).second);
  struct stat st;
  if (::fstatat(from_dir.get(), from_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
    return NotFoundError("no such object '" + std::string(from) + "' in " + RootUri());
  }
  if (!options.expected_version.empty() &&
      (!S_ISREG(st.st_mode) ||
       internal::LocalInfoFromStat(st).version != options.expected_version)) {
    return FailedPreconditionError(where + " is no longer version " + options.expected_version);
  }
  CAIRN_ASSIGN_OR_RETURN(UniqueFd to_dir, root_->MakeDirs(SplitParent(to).first));
  const std::string to_name(SplitParent(to).second);
  struct stat target;
  if (S_ISREG(st.st_mode) &&
      ::fstatat(to_dir.get(), to_name.c_str(), &target, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(target.st_mode)) {
    return InvalidArgumentError(root_->path() + "/" + std::string(to) + " is a folder");
  }
  const unsigned flags =
      options.condition.kind == WriteCondition::Kind::kAbsent ? RENAME_NOREPLACE : 0;
  if (::renameat2(from_dir.get(), from_name.c_str(), to_dir.get(), to_name.c_str(), flags) != 0) {
    const int err = errno;
    const std::string what = "rename " + where + " to " + std::string(to);
    switch (err) {
      case EEXIST:
        if (flags != 0) return AlreadyExistsError(what + ": the destination exists");
        [[fallthrough]];
      case ENOTEMPTY:
        return FailedPreconditionError(what + ": the destination is a folder that is not empty");
      case ENOTDIR:
        return FailedPreconditionError(what + ": the destination is a file");
      case EISDIR:
        return InvalidArgumentError(what + ": the destination is a folder");
      case ENOENT:
        return NotFoundError("no such object '" + std::string(from) + "' in " + RootUri());
      default:
        return ErrnoToStatus(err, what);
    }
  }
  CAIRN_RETURN_IF_ERROR(SyncFolder(to_dir, root_->path() + "/" + std::string(to)));
  CAIRN_RETURN_IF_ERROR(SyncFolder(from_dir, where));
  if (::fstatat(to_dir.get(), to_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoToStatus(errno, "stat " + root_->path() + "/" + std::string(to));
  }
  ObjectInfo info = internal::LocalInfoFromStat(st);
  info.key = std::string(to);
  info.is_dir = S_ISDIR(st.st_mode);
  return info;
}

Status LocalUnderStorage::MakeDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  CAIRN_ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(*root_, key, RootUri()));
  const std::string name(SplitParent(key).second);
  const std::string where = root_->path() + "/" + std::string(key);
  if (::mkdirat(dir.get(), name.c_str(), 0755) != 0) {
    const int err = errno;
    if (err == EEXIST) return AlreadyExistsError(where + " already exists");
    return ErrnoToStatus(err, "mkdir " + where);
  }
  return SyncFolder(dir, where);
}

Status LocalUnderStorage::RemoveDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  CAIRN_ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(*root_, key, RootUri()));
  const std::string name(SplitParent(key).second);
  const std::string where = root_->path() + "/" + std::string(key);
  if (::unlinkat(dir.get(), name.c_str(), AT_REMOVEDIR) != 0) {
    const int err = errno;
    if (err == ENOENT) return NotFoundError("no such folder " + where);
    if (err == ENOTEMPTY || err == EEXIST) {
      return FailedPreconditionError("folder " + where + " is not empty");
    }
    if (err == ENOTDIR) return InvalidArgumentError(where + " is not a folder");
    return ErrnoToStatus(err, "rmdir " + where);
  }
  return SyncFolder(dir, where);
}

}  // namespace cairn::ufs
