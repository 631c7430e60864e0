// Status and StatusOr<T>: errors as values across every module boundary.
//
// A Status is either OK or carries a code from the short list below and a human-readable message.
// Codes say what the caller can do about the error:
//   kNotFound          the named thing does not exist (object, page, mount, file).
//   kInvalidArgument   the caller passed something malformed; retrying will not help.
//   kCorruption        stored bytes failed a check (checksum, header, length); drop and refetch.
//   kIoError           the local OS refused an operation (disk full, EIO, ...).
//   kUnavailable       a remote peer could not be reached or answered 5xx/SlowDown; retryable.
//   kDeadlineExceeded  the operation ran past its deadline; retryable elsewhere.
//   kPermissionDenied  credentials or file modes refuse the operation.
//   kFailedPrecondition the object changed (version mismatch) or state forbids the call.
//   kResourceExhausted capacity or a quota is full and nothing can be freed now.
//   kAlreadyExists     create of something that exists.
//   kUnimplemented     the backend does not support the operation.
//   kInternal          a bug or an unexpected state; logged loudly.
// Thread-safety: values; safe to copy between threads.
#ifndef CAIRN_COMMON_STATUS_H_
#define CAIRN_COMMON_STATUS_H_

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace cairn {

enum class StatusCode : int {
  kOk = 0,
  kNotFound,
  kInvalidArgument,
  kCorruption,
  kIoError,
  kUnavailable,
  kDeadlineExceeded,
  kPermissionDenied,
  kFailedPrecondition,
  kResourceExhausted,
  kAlreadyExists,
  kUnimplemented,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

// A finer cause within a code, for a caller that acts on it (or an errno that says more than
// the code's). Carried by write replies (docs/protocol.md, v14): values are appended, never
// reused, and one a reader does not know reads as kNone.
enum class StatusReason : uint16_t {
  kNone = 0,
  // ResourceExhausted: a cap on the files open for writing (a worker's, or one principal's),
  // which waiting for room in the write-back budget does not lift: EMFILE, not ENOSPC.
  kTooManyOpenFiles = 1,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NotFound: no such object 'a/b'" or "OK".
  std::string ToString() const;

  // Returns a copy with `context` prefixed to the message ("context: message"). Keeps
  // outcome_unknown(), not_sent() and reason().
  Status WithContext(std::string_view context) const;

  // Whether the operation that failed may still have taken effect: a request sent to a peer
  // that then failed to answer (its connection broke, its deadline passed). Such a failure
  // must not be retried elsewhere as if nothing had happened where a second attempt is not
  // harmless (a rename, a remove). A failure without the mark is one the operation did not
  // reach its target with (a refused connection), or one the target reported itself.
  bool outcome_unknown() const { return outcome_unknown_; }
  // A copy marked outcome_unknown() (an error only: OK stays OK).
  Status WithOutcomeUnknown() const {
    Status s = *this;
    s.outcome_unknown_ = !ok();
    return s;
  }

  // A copy without the mark, for a caller that knows the operation it reports on cannot have
  // taken effect: the failure was in a step before the one that could (a part of an upload
  // that failed before its commit was sent).
  Status WithOutcomeKnown() const {
    Status s = *this;
    s.outcome_unknown_ = false;
    return s;
  }

  // Whether the request never left this process (the peer's channel refused it: no
  // connection, or the peer is suspect for a moment after it missed a deadline): nothing
  // happened, and sending it again, to the same peer too, is always safe.
  bool not_sent() const { return not_sent_; }
  // A copy marked not_sent() (an error only: OK stays OK).
  Status WithNotSent() const {
    Status s = *this;
    s.not_sent_ = !ok();
    return s;
  }

  StatusReason reason() const { return reason_; }
  // A copy with `reason` (an error only: OK stays OK, without one).
  Status WithReason(StatusReason reason) const {
    Status s = *this;
    s.reason_ = ok() ? StatusReason::kNone : reason;
    return s;
  }

  // Explicitly drops a status the caller decided not to act on.
  void IgnoreError() const {}

  bool operator==(const Status& other) const {
    return code_ == other.code_ && message_ == other.message_ &&
           outcome_unknown_ == other.outcome_unknown_ && not_sent_ == other.not_sent_ &&
           reason_ == other.reason_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  bool outcome_unknown_ = false;
  bool not_sent_ = false;
  StatusReason reason_ = StatusReason::kNone;
};

inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status CorruptionError(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status PermissionDeniedError(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status AlreadyExistsError(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Builds an IoError (or NotFound/PermissionDenied for ENOENT/EACCES) from an errno value.
Status ErrnoToStatus(int err, std::string_view context);

namespace internal {
// Prints "<what>: <status>" to stderr and aborts. Out of line and cold: the check in value()
// stays a compare and a predicted branch.
[[noreturn]] void DieOnBadStatusOrAccess(const Status& status);
}  // namespace internal

// StatusOr<T>: either a T or a non-OK Status. Accessing value() of an error is a bug: it aborts
// with the status in every build type (never undefined behaviour).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr built from OK status without a value");
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    CheckOk();
    return *value_;
  }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!status_.ok()) [[unlikely]]
      internal::DieOnBadStatusOrAccess(status_);
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace cairn

#define CAIRN_STATUS_CONCAT_INNER(a, b) a##b
#define CAIRN_STATUS_CONCAT(a, b) CAIRN_STATUS_CONCAT_INNER(a, b)

// Returns from the current function if `expr` (a Status) is not OK.
#define CAIRN_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::cairn::Status _cairn_st = (expr);    \
    if (!_cairn_st.ok()) return _cairn_st; \
  } while (0)

// CAIRN_ASSIGN_OR_RETURN(auto x, StatusOrExpr()): binds the value or returns the error.
#define CAIRN_ASSIGN_OR_RETURN(lhs, expr) \
  CAIRN_ASSIGN_OR_RETURN_IMPL(CAIRN_STATUS_CONCAT(_cairn_so_, __LINE__), lhs, expr)
#define CAIRN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // CAIRN_COMMON_STATUS_H_
