#include "ufs/local_ufs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

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

Status WriteAll(int fd, std::span<const char> data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "write " + what);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
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

Status LocalUnderStorage::Write(std::string_view key, std::span<const char> data) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  auto [parent, name] = SplitParent(key);
  std::string name_str(name);
  if (name.starts_with(kLocalTempPrefix)) {
    return InvalidArgumentError("key '" + std::string(key) + "' uses the reserved name prefix " +
                                std::string(kLocalTempPrefix));
  }
  CAIRN_ASSIGN_OR_RETURN(UniqueFd dir, root_->MakeDirs(parent));
  std::string tmp = TempName();
  std::string where = root_->path() + "/" + std::string(key);
  int raw = ::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (raw < 0) return ErrnoToStatus(errno, "create temp file for " + where);
  UniqueFd file(raw);
  auto fail = [&](Status s) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return s;
  };
  Status st = WriteAll(file.get(), data, where);
  if (!st.ok()) return fail(st);
  if (::fsync(file.get()) != 0) return fail(ErrnoToStatus(errno, "fsync " + where));
  if (::close(file.release()) != 0) return fail(ErrnoToStatus(errno, "close " + where));
  if (::renameat(dir.get(), tmp.c_str(), dir.get(), name_str.c_str()) != 0) {
    int err = errno;
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) {
      return fail(FailedPreconditionError(where + " is a folder; cannot write an object there"));
    }
    if (err == ENAMETOOLONG) return fail(InvalidArgumentError("name too long: " + where));
    return fail(ErrnoToStatus(err, "rename into " + where));
  }
  // Makes the rename itself durable.
  if (::fsync(dir.get()) != 0) return ErrnoToStatus(errno, "fsync folder of " + where);
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

}  // namespace cairn::ufs
