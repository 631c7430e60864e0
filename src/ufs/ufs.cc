// OpenUnderStorage (scheme dispatch) and Probe.
#include "ufs/ufs.h"

#include "common/uri.h"
#include "ufs/local_ufs.h"
#include "ufs/retrying_ufs.h"
#include "ufs/s3_ufs.h"

namespace cairn::ufs {

StatusOr<std::shared_ptr<UnderStorage>> OpenUnderStorage(std::string_view uri,
                                                         const UfsOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(Uri parsed, ParseUri(uri));
  if (parsed.scheme == "file") {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LocalUnderStorage> local,
                           LocalUnderStorage::Open(parsed.path));
    return std::shared_ptr<UnderStorage>(std::move(local));
  }
  if (parsed.scheme == "s3") {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<S3UnderStorage> s3,
                           S3UnderStorage::Create(parsed, options, s3::ProcessEnv()));
    RetryOptions retry;
    retry.max_retries = options.max_retries;
    return std::shared_ptr<UnderStorage>(std::make_shared<RetryingUnderStorage>(
        std::shared_ptr<UnderStorage>(std::move(s3)), retry));
  }
  return InvalidArgumentError("unknown source scheme '" + parsed.scheme +
                              "' (supported: file, s3)");
}

Status Probe(UnderStorage& ufs) {
  ListOptions options;
  options.max_keys = 1;
  StatusOr<ListResult> r = ufs.List(options);
  if (r.ok()) return Status::Ok();
  const Status& st = r.status();
  std::string root = ufs.RootUri();
  switch (st.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return Status(st.code(),
                    "cannot reach " + root + " (is the endpoint right and up?): " + st.message());
    case StatusCode::kPermissionDenied:
      return PermissionDeniedError("access to " + root +
                                   " refused (wrong credentials?): " + st.message());
    case StatusCode::kNotFound:
      return NotFoundError(root + " does not exist (missing bucket or folder?): " + st.message());
    default:
      return st.WithContext("probe of " + root);
  }
}

}  // namespace cairn::ufs
