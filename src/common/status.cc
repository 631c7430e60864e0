#include "common/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cairn {

namespace internal {
void DieOnBadStatusOrAccess(const Status& status) {
  std::fprintf(stderr, "StatusOr::value() called on an error: %s\n", status.ToString().c_str());
  std::abort();
}
}  // namespace internal

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  Status out(code_, std::move(m));
  out.outcome_unknown_ = outcome_unknown_;
  out.not_sent_ = not_sent_;
  out.reason_ = reason_;
  return out;
}

Status ErrnoToStatus(int err, std::string_view context) {
  std::string m(context);
  m += ": ";
  m += std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFoundError(std::move(m));
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(m));
    case EEXIST:
      return AlreadyExistsError(std::move(m));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhaustedError(std::move(m));
    case EINVAL:
      return InvalidArgumentError(std::move(m));
    default:
      return IoError(std::move(m));
  }
}

}  // namespace cairn
