#include "ufs/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace cairn::ufs {
namespace {

// openat2 may return EAGAIN under RESOLVE_BENEATH when a concurrent rename anywhere on the system
// could have raced the lookup; the kernel expects callers to retry.
constexpr int kOpenat2Attempts = 8;

int RawOpenat2(int dirfd, const char* path, int flags, mode_t mode) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof(how)));
}

bool HasDotDot(std::string_view rel) {
  size_t start = 0;
  while (start <= rel.size()) {
    size_t slash = rel.find('/', start);
    std::string_view comp =
        rel.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (comp == "..") return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

Status MapOpenErrno(int err, std::string_view root, std::string_view rel) {
  std::string where = std::string(root) + "/" + std::string(rel);
  switch (err) {
    case EXDEV:
      return PermissionDeniedError("'" + std::string(rel) + "' resolves outside the root " +
                                   std::string(root));
    case ELOOP:
      return PermissionDeniedError("symlink refused (or symlink loop) at " + where);
    case ENOTDIR:
      return NotFoundError("a parent of " + where + " is not a folder");
    default:
      return ErrnoToStatus(err, where);
  }
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::unique_ptr<RootDir>> RootDir::Open(const std::string& path, bool allow_openat2) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOTDIR) return InvalidArgumentError("local root " + path + " is not a folder");
    return ErrnoToStatus(err, "cannot open local root " + path);
  }
  UniqueFd root(fd);
  // Probe once: ENOSYS on old kernels, EPERM under seccomp filters that predate openat2.
  int probe = allow_openat2 ? RawOpenat2(root.get(), ".", O_PATH | O_DIRECTORY, 0) : -1;
  bool use_openat2 = probe >= 0;
  if (probe >= 0) ::close(probe);
  return std::unique_ptr<RootDir>(new RootDir(path, std::move(root), use_openat2));
}

StatusOr<UniqueFd> RootDir::OpenBeneath(std::string_view rel, int flags, mode_t mode) const {
  // Keys are validated before they get here; this guard keeps the fallback walk from ever
  // stepping above the root even if a caller forgets.
  if (HasDotDot(rel)) {
    return InvalidArgumentError("path '" + std::string(rel) + "' has a '..' component");
  }
  if (!use_openat2_) return OpenByWalking(rel, flags, mode);
  std::string path = rel.empty() ? std::string(".") : std::string(rel);
  for (int attempt = 0;; ++attempt) {
    int fd = RawOpenat2(fd_.get(), path.c_str(), flags, mode);
    if (fd >= 0) return UniqueFd(fd);
    int err = errno;
    if ((err == EAGAIN || err == EINTR) && attempt + 1 < kOpenat2Attempts) continue;
    return MapOpenErrno(err, path_, rel);
  }
}

StatusOr<UniqueFd> RootDir::OpenByWalking(std::string_view rel, int flags, mode_t mode) const {
  if (rel.empty()) {
    int fd = ::openat(fd_.get(), ".", flags | O_CLOEXEC, mode);
    if (fd < 0) return MapOpenErrno(errno, path_, rel);
    return UniqueFd(fd);
  }
  UniqueFd current;  // Invalid means "the root".
  size_t start = 0;
  while (true) {
    size_t slash = rel.find('/', start);
    bool last = slash == std::string_view::npos;
    int dirfd = current.valid() ? current.get() : fd_.get();
    std::string comp(rel.substr(start, last ? std::string_view::npos : slash - start));
    int fd = last ? ::openat(dirfd, comp.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode)
                  : ::openat(dirfd, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    // O_NOFOLLOW reports a symlink as ELOOP or ENOTDIR, or (with O_PATH) opens the link
    // itself; all three are the same refusal.
    struct stat st;
    bool is_link = fd >= 0 ? (::fstat(fd, &st) == 0 && S_ISLNK(st.st_mode))
                           : ((err == ELOOP || err == ENOTDIR) &&
                              ::fstatat(dirfd, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                              S_ISLNK(st.st_mode));
    if (is_link) {
      if (fd >= 0) ::close(fd);
      return PermissionDeniedError("symlink refused at " + path_ + "/" + std::string(rel) +
                                   " (this kernel has no openat2 to follow it safely)");
    }
    if (fd < 0) return MapOpenErrno(err, path_, rel);
    if (last) return UniqueFd(fd);
    current = UniqueFd(fd);
    start = slash + 1;
  }
}

StatusOr<UniqueFd> RootDir::MakeDirs(std::string_view rel) const {
  constexpr int kDirFlags = O_RDONLY | O_DIRECTORY;
  CAIRN_ASSIGN_OR_RETURN(UniqueFd current, OpenBeneath("", kDirFlags));
  size_t start = 0;
  while (start < rel.size()) {
    size_t slash = rel.find('/', start);
    size_t end = slash == std::string_view::npos ? rel.size() : slash;
    std::string comp(rel.substr(start, end - start));
    // mkdirat never follows a symlink in its last component, and `current` was itself resolved
    // beneath the root, so this cannot create anything outside it.
    if (::mkdirat(current.get(), comp.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno,
                           "cannot create folder " + path_ + "/" + std::string(rel.substr(0, end)));
    }
    std::string_view sub = rel.substr(0, end);
    StatusOr<UniqueFd> next = OpenBeneath(sub, kDirFlags);
    if (!next.ok()) {
      if (next.status().code() == StatusCode::kNotFound) {
        struct stat st;
        if (::fstatat(current.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISDIR(st.st_mode)) {
          return FailedPreconditionError(path_ + "/" + std::string(sub) +
                                         " exists and is not a folder");
        }
      }
      return next.status();
    }
    current = std::move(next).value();
    start = end + 1;
  }
  return current;
}

}  // namespace cairn::ufs
