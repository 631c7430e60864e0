#include "py_errors.h"

#include <pybind11/pybind11.h>

#include <cerrno>

namespace cairn::python {

namespace py = pybind11;

int ErrnoFor(const Status& status, Op op) {
  const std::string& message = status.message();
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kPermissionDenied:
      return EACCES;
    case StatusCode::kAlreadyExists:
      return EEXIST;
    case StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case StatusCode::kResourceExhausted:
      return status.reason() == StatusReason::kTooManyOpenFiles ? EMFILE : ENOSPC;
    case StatusCode::kInvalidArgument:
      if (message.find("is not a directory") != std::string::npos) return ENOTDIR;
      if (message.find("is a directory") != std::string::npos) return EISDIR;
      return EINVAL;
    case StatusCode::kFailedPrecondition:
      // Writes a worker or a mount does not take (as the FUSE mount answers): not a conflict.
      if (message.find("is read-only") != std::string::npos ||
          message.find("takes no writes") != std::string::npos) {
        return EROFS;
      }
      switch (op) {
        case Op::kRemoveDir:
          return ENOTEMPTY;
        case Op::kOpenWrite:
          return EIO;  // An open loses to no other writer (its commit may: below).
        case Op::kWrite:
          return EIO;  // The file is being closed, or was aborted: not a conflict.
        case Op::kCommit:
        case Op::kRename:
          return EEXIST;  // Someone else changed the file since it was read.
        default:
          return ESTALE;  // The object changed under an open file: reopen it.
      }
    case StatusCode::kUnimplemented:
      return op == Op::kRename ? EXDEV : ENOTSUP;
    default:
      return EIO;
  }
}

void RaiseErrno(int err, const std::string& text, const std::string& path) {
  // Messages and paths may quote bytes from a source that are not UTF-8: never fail on them.
  py::object message = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace"));
  py::object filename =
      path.empty() ? py::none()
                   : py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
                         path.data(), static_cast<Py_ssize_t>(path.size()), "surrogateescape"));
  if (!message || !filename) throw py::error_already_set();
  // OSError(errno, text, filename) picks the subclass for errno itself.
  py::object error = py::reinterpret_steal<py::object>(
      PyObject_CallFunction(PyExc_OSError, "iOO", err, message.ptr(), filename.ptr()));
  if (!error) throw py::error_already_set();
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

void RaiseStatus(const Status& status, Op op, const std::string& path) {
  RaiseErrno(ErrnoFor(status, op), status.message().empty() ? status.ToString() : status.message(),
             path);
}

}  // namespace cairn::python
