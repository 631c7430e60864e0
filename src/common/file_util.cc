#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace cairn {

StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFoundError("cannot read " + path + ": " + std::strerror(errno));
  std::string out;
  char buf[16384];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return IoError("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      close(fd);
      return InvalidArgumentError(path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode, bool force) {
  if (!force && access(path.c_str(), F_OK) == 0) {
    return AlreadyExistsError(path + " exists (give --force to replace it)");
  }
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return IoError("cannot create " + tmp + ": " + std::strerror(errno));
  if (fchmod(fd, mode) != 0) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return IoError("cannot set the mode of " + tmp + ": " + std::strerror(err));
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return IoError("cannot write " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(tmp.c_str());
    return IoError("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return IoError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status SyncFolderOf(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open folder of " + path);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? Status::Ok() : ErrnoToStatus(err, "sync folder of " + path);
}

}  // namespace cairn
