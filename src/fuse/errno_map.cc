#include "fuse/errno_map.h"

#include <spdlog/spdlog.h>

#include <cerrno>

namespace cairn::fuse {

int ErrnoFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kInvalidArgument:
      return EINVAL;
    case StatusCode::kPermissionDenied:
      return EACCES;
    case StatusCode::kAlreadyExists:  // An exclusive create.
      return EEXIST;
    case StatusCode::kResourceExhausted:  // A full disk or budget; a worker's open-files cap.
      return status.reason() == StatusReason::kTooManyOpenFiles ? EMFILE : ENOSPC;
    default:
      return EIO;
  }
}

int ErrnoForReply(const Status& status, std::string_view op, std::string_view path) {
  const int err = ErrnoFromStatus(status);
  if (err != EIO) return err;
  if (status.code() == StatusCode::kFailedPrecondition) {
    spdlog::warn(
        "fuse: {} '{}': object changed while open, failing with EIO (reopen the file "
        "to read the new version): {}",
        op, path, status.ToString());
  } else {
    spdlog::warn("fuse: {} '{}' failed with EIO: {}", op, path, status.ToString());
  }
  return err;
}

}  // namespace cairn::fuse
