// How the Python SDK turns a cairn::Status into a Python exception (docs/python.md, "Errors").
//
// Every error becomes an OSError whose errno names the condition, so Python picks the usual
// subclass by itself (FileNotFoundError for ENOENT, PermissionError for EACCES, FileExistsError,
// IsADirectoryError, NotADirectoryError, TimeoutError for ETIMEDOUT) and callers that catch
// OSError catch everything Cairn raises. The message is the Status's, the filename the path the
// call was about.
//
//   NotFound            ENOENT
//   PermissionDenied    EACCES
//   AlreadyExists       EEXIST
//   DeadlineExceeded    ETIMEDOUT
//   ResourceExhausted   ENOSPC
//   InvalidArgument     EISDIR / ENOTDIR where the message says so (the client's wording for
//                       "is a directory" / "is not a directory"), EINVAL otherwise
//   FailedPrecondition  by operation: ENOTEMPTY (rmdir), EEXIST or ESTALE (a commit that lost to
//                       another writer / a read of an object that changed since open)
//   Unimplemented       EXDEV (rename), ENOTSUP otherwise
//   anything else       EIO
//
// Thread-safety: RaiseStatus must be called with the GIL held (it builds Python objects).
#ifndef CAIRN_PYTHON_PY_ERRORS_H_
#define CAIRN_PYTHON_PY_ERRORS_H_

#include <string>

#include "common/status.h"

namespace cairn::python {

// The operation that failed; some codes mean different things for different operations.
// kWrite: a write, truncate or abort of an open file (kCommit: its sync or close).
enum class Op {
  kRead,
  kOpenWrite,
  kWrite,
  kCommit,
  kRemove,
  kRemoveDir,
  kMakeDir,
  kRename,
  kOther
};

// The errno that `status` (not OK) maps to for `op`.
int ErrnoFor(const Status& status, Op op);

// Sets OSError(err, message, path) (its errno subclass) and throws error_already_set; an empty
// path gives no filename.
[[noreturn]] void RaiseErrno(int err, const std::string& message, const std::string& path);

// Sets the Python error for `status` (not OK) and throws pybind11::error_already_set.
[[noreturn]] void RaiseStatus(const Status& status, Op op, const std::string& path);

}  // namespace cairn::python

#endif  // CAIRN_PYTHON_PY_ERRORS_H_
