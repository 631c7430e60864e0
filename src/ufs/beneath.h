// RootDir: opens paths below a root directory without ever leaving it.
//
// Keys are validated lexically before they get here (no "..", no leading '/'), but a symlink
// planted inside the root could still point outside it. On Linux >= 5.6 every lookup goes through
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): symlinks that stay inside the root work, any
// resolution that would leave it fails with PermissionDenied. Where openat2 is missing (older
// kernels, or seccomp profiles that refuse it) lookups walk the path one component at a time with
// O_NOFOLLOW, so every symlink is refused; safe, but symlinks stop working.
//
// Thread-safety: RootDir is immutable after Open; all methods are safe to call concurrently.
#ifndef CAIRN_UFS_BENEATH_H_
#define CAIRN_UFS_BENEATH_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace cairn::ufs {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

class RootDir {
 public:
  // Opens the directory at absolute `path`. NotFound if it does not exist, InvalidArgument if it
  // is not a directory, PermissionDenied/IoError from the OS otherwise. `allow_openat2` = false
  // forces the component-walking fallback (tests of that path).
  static StatusOr<std::unique_ptr<RootDir>> Open(const std::string& path,
                                                 bool allow_openat2 = true);

  // Opens `rel` (a relative path, "" for the root itself) with open(2) `flags` (O_CLOEXEC is
  // added) and `mode`, resolving every component below the root. Errors carry errno semantics
  // (ErrnoToStatus: ENOENT -> NotFound, ...), ENOTDIR maps to NotFound too (a file where a folder
  // was expected), and an escape attempt (or, without openat2, any symlink) is PermissionDenied.
  StatusOr<UniqueFd> OpenBeneath(std::string_view rel, int flags, mode_t mode = 0) const;

  // Creates the folders of relative path `rel` that are missing (mode 0755) and returns the last
  // one opened O_RDONLY|O_DIRECTORY. `rel` "" returns the root. FailedPrecondition when a
  // component exists as a non-directory.
  StatusOr<UniqueFd> MakeDirs(std::string_view rel) const;

  const std::string& path() const { return path_; }
  // True when lookups use openat2 (symlinks inside the root are followed).
  bool uses_openat2() const { return use_openat2_; }

 private:
  RootDir(std::string path, UniqueFd fd, bool use_openat2)
      : path_(std::move(path)), fd_(std::move(fd)), use_openat2_(use_openat2) {}

  // Fallback lookup: one component at a time, refusing symlinks.
  StatusOr<UniqueFd> OpenByWalking(std::string_view rel, int flags, mode_t mode) const;

  std::string path_;
  UniqueFd fd_;
  bool use_openat2_;
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_BENEATH_H_
