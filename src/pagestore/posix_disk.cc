// The POSIX implementation of Disk.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/aligned_buffer.h"
#include "common/iovec_writer.h"
#include "pagestore/disk.h"

namespace cairn::pagestore {
namespace {

Status Errno(std::string_view what, const std::string& path) {
  return ErrnoToStatus(errno, std::string(what) + " " + path);
}

// Opens a second descriptor of the file behind `fd` with O_DIRECT. Through /proc/self/fd, not
// by name: the file may have been unlinked or replaced under its name since it was opened, and
// this must read the very same file. -1 where that is not possible (no /proc, a file system
// without O_DIRECT such as tmpfs).
int OpenDirect(int fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  int direct = ::open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (direct < 0) return -1;
  struct stat a {
  }, b{};
  if (::fstat(fd, &a) != 0 || ::fstat(direct, &b) != 0 || a.st_ino != b.st_ino ||
      a.st_dev != b.st_dev) {
    ::close(direct);
    return -1;
  }
  return direct;
}

// Reads at `offset` until `out` is full or the end of the file; the count read.
StatusOr<size_t> PreadFull(int fd, uint64_t offset, std::span<char> out, const char* what) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, what);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

class PosixFile final : public RandomAccessFile {
 public:
  explicit PosixFile(int fd) : fd_(fd) {}
  ~PosixFile() override {
    ::close(fd_);
    const int direct = direct_fd_.load(std::memory_order_relaxed);
    if (direct >= 0) ::close(direct);
  }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out) const override {
    return PreadFull(fd_, offset, out, "pread");
  }

  StatusOr<size_t> ReadDirectAt(uint64_t offset, std::span<char> out) const override {
    const size_t head = out.size() - out.size() % kDirectIoAlignment;
    int direct = -1;
    if (head > 0 && DirectIoAligned(out.data(), offset, head) &&
        !direct_refused_.load(std::memory_order_relaxed)) {
      direct = DirectFd();
    }
    size_t done = 0;
    while (direct >= 0 && done < head) {
      ssize_t n =
          ::pread(direct, out.data() + done, head - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EINVAL) {
        // The file system opened the file with O_DIRECT but wants another alignment: read this
        // file through the page cache from now on.
        direct_refused_.store(true, std::memory_order_relaxed);
        break;
      }
      if (n < 0) return ErrnoToStatus(errno, "pread (O_DIRECT)");
      if (n == 0) return done;  // The end of the file.
      done += static_cast<size_t>(n);
      if (done % kDirectIoAlignment != 0) break;  // Short of a block: the file ends in it.
    }
    // The tail shorter than a block, or all of it when the page cache cannot be bypassed.
    CAIRN_ASSIGN_OR_RETURN(size_t rest, PreadFull(fd_, offset + done, out.subspan(done), "pread"));
    return done + rest;
  }

  StatusOr<uint64_t> Size() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoToStatus(errno, "fstat");
    return static_cast<uint64_t>(st.st_size);
  }

  int native_fd() const override { return fd_; }

 private:
  // The O_DIRECT descriptor, opened at the first direct read; -1 if it cannot be had.
  int DirectFd() const {
    int fd = direct_fd_.load(std::memory_order_acquire);
    if (fd != kNotOpened) return fd;
    const int opened = OpenDirect(fd_);
    int expected = kNotOpened;
    if (direct_fd_.compare_exchange_strong(expected, opened, std::memory_order_acq_rel)) {
      return opened;
    }
    if (opened >= 0) ::close(opened);  // Another reader opened it first.
    return expected;
  }

  static constexpr int kNotOpened = -2;
  const int fd_;
  // Closed only by the destructor: a reader may be using it at any time.
  mutable std::atomic<int> direct_fd_{kNotOpened};
  mutable std::atomic<bool> direct_refused_{false};
};

class PosixLock final : public DiskLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override { ::close(fd_); }  // Closing the descriptor releases the flock.
  PosixLock(const PosixLock&) = delete;
  PosixLock& operator=(const PosixLock&) = delete;

 private:
  const int fd_;
};

// Writes all of `iov` at the current position, resuming after short writes and EINTR.
Status WriteAll(int fd, std::vector<struct iovec> iov) {
  const int error = WriteAllIovecs(
      iov, [fd](const iovec* first, int count) { return ::writev(fd, first, count); });
  return error == 0 ? Status::Ok() : ErrnoToStatus(error, "write");
}

class PosixDiskImpl final : public Disk {
 public:
  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0700) == 0) {
      // mkdir's mode is filtered by the umask; chmod sets exactly what we asked for.
      if (::chmod(path.c_str(), 0700) != 0) return Errno("chmod", path);
      return Status::Ok();
    }
    if (errno != EEXIST) return Errno("mkdir", path);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Errno("stat", path);
    if (!S_ISDIR(st.st_mode)) {
      return FailedPreconditionError(path + " exists and is not a directory");
    }
    return Status::Ok();
  }

  StatusOr<FileInfo> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Errno("stat", path);
    FileInfo info;
    info.is_dir = S_ISDIR(st.st_mode);
    info.is_regular = S_ISREG(st.st_mode);
    info.mode = st.st_mode & 07777;
    info.size = static_cast<uint64_t>(st.st_size);
    return info;
  }

  Status CheckWritable(const std::string& path) override {
    // AT_EACCESS: check with the effective ids, the ones our file operations will use.
    if (::faccessat(AT_FDCWD, path.c_str(), W_OK | X_OK, AT_EACCESS) == 0) return Status::Ok();
    if (errno == EACCES || errno == EPERM || errno == EROFS) {
      return PermissionDeniedError(path +
                                   " is not writable by this process: " + std::strerror(errno));
    }
    return Errno("access", path);
  }

  StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return Errno("open", path);
    return std::unique_ptr<RandomAccessFile>(std::make_unique<PosixFile>(fd));
  }

  Status WriteNewFile(const std::string& path,
                      std::span<const std::span<const char>> pieces) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return Errno("create", path);
    std::vector<struct iovec> iov;
    for (std::span<const char> piece : pieces) {
      if (piece.empty()) continue;
      iov.push_back({const_cast<char*>(piece.data()), piece.size()});
    }
    Status s = WriteAll(fd, std::move(iov)).WithContext(path);
    // close() can report a deferred write error (e.g. on NFS); do not ignore it.
    if (::close(fd) != 0 && s.ok()) s = Errno("close", path);
    if (!s.ok()) ::unlink(path.c_str());
    return s;
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("rename", from);
    return Status::Ok();
  }

  Status Unlink(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Errno("unlink", path);
    return Status::Ok();
  }

  StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) override {
    int dfd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return Errno("open directory", path);
    DIR* dir = ::fdopendir(dfd);
    if (dir == nullptr) {
      Status s = Errno("fdopendir", path);
      ::close(dfd);
      return s;
    }
    std::vector<DirEntry> out;
    Status status;
    while (true) {
      errno = 0;
      struct dirent* e = ::readdir(dir);
      if (e == nullptr) {
        if (errno != 0) status = Errno("readdir", path);
        break;
      }
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      DirEntry entry;
      entry.name = e->d_name;
      if (e->d_type == DT_DIR) {
        entry.is_dir = true;
      } else if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN) {
        // Sizes need one fstatat per file; relative to the directory fd, so no path building.
        struct stat st;
        if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
          if (errno == ENOENT) continue;  // Removed since readdir returned it.
          status = Errno("stat", path + "/" + entry.name);
          break;
        }
        entry.is_dir = S_ISDIR(st.st_mode);
        entry.is_regular = S_ISREG(st.st_mode);
        entry.size = static_cast<uint64_t>(st.st_size);
      }
      out.push_back(std::move(entry));
    }
    ::closedir(dir);  // Also closes dfd.
    if (!status.ok()) return status;
    return out;
  }

  StatusOr<uint64_t> FileSystemUsedBytes(const std::string& path) override {
    struct statvfs vfs;
    if (::statvfs(path.c_str(), &vfs) != 0) return Errno("statvfs", path);
    return static_cast<uint64_t>(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
  }

  StatusOr<std::unique_ptr<DiskLock>> LockFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return Errno("open", path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return FailedPreconditionError(path +
                                       " is locked: the cache folder is in use by another "
                                       "page store (another process, or listed twice)");
      }
      return ErrnoToStatus(err, "flock " + path);
    }
    return std::unique_ptr<DiskLock>(std::make_unique<PosixLock>(fd));
  }
};

}  // namespace

std::shared_ptr<Disk> PosixDisk() {
  static const std::shared_ptr<Disk> disk = std::make_shared<PosixDiskImpl>();
  return disk;
}

}  // namespace cairn::pagestore
