// Translation of client errors (cairn::Status) into the errno values a FUSE reply carries.
//
//   NotFound            -> ENOENT
//   InvalidArgument     -> EINVAL
//   PermissionDenied    -> EACCES
//   AlreadyExists       -> EEXIST
//   ResourceExhausted   -> ENOSPC  (EMFILE for a worker's cap on files open for writing)
//   FailedPrecondition  -> EIO     (the object changed under an open file; logged)
//   Unavailable         -> EIO     (no worker and no under-storage could serve; logged)
//   DeadlineExceeded    -> EIO     (logged)
//   anything else       -> EIO     (logged)
//
// Errors that describe the request (ENOENT, EINVAL, EACCES) are expected traffic and are not
// logged; everything mapped to EIO is, because the application only sees "I/O error" and the
// operator needs the real reason.
// Thread-safety: pure functions (logging goes through spdlog, which is thread-safe).
#ifndef CAIRN_FUSE_ERRNO_MAP_H_
#define CAIRN_FUSE_ERRNO_MAP_H_

#include <string_view>

#include "common/status.h"

namespace cairn::fuse {

// The errno for `status` (0 for OK), without logging.
int ErrnoFromStatus(const Status& status);

// ErrnoFromStatus, logging a warning naming the FUSE operation and path when the result is EIO.
int ErrnoForReply(const Status& status, std::string_view op, std::string_view path);

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_ERRNO_MAP_H_
