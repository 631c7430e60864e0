// UnderStorage::Write, OpenUnderStorage (scheme dispatch) and Probe.
#include "ufs/ufs.h"

#include <algorithm>

#include "common/uri.h"
#include "ufs/local_ufs.h"
#include "ufs/retrying_ufs.h"
#include "ufs/s3_ufs.h"
#include "ufs/throttled_ufs.h"
#include "ufs/ufs_limiter.h"

namespace cairn::ufs {

namespace {

// Wraps `store` in the caps of `options`, if any.
StatusOr<std::shared_ptr<UnderStorage>> Throttle(std::shared_ptr<UnderStorage> store,
                                                 const UfsOptions& options) {
  std::vector<std::shared_ptr<UfsLimiter>> limiters = options.shared_limiters;
  if (options.max_concurrency > 0 || options.max_bytes_per_second > 0) {
    LimiterOptions lo;
    lo.max_concurrency = options.max_concurrency;
    lo.max_bytes_per_second = options.max_bytes_per_second;
    lo.name = store->RootUri();
    CAIRN_ASSIGN_OR_RETURN(auto own, UfsLimiter::Create(lo));
    limiters.push_back(std::move(own));
  }
  if (limiters.empty()) return store;
  return std::shared_ptr<UnderStorage>(
      std::make_shared<ThrottledUnderStorage>(std::move(store), std::move(limiters)));
}

}  // namespace

Status UnderStorage::Write(std::string_view key, std::span<const char> data) {
  // One part (one S3 PUT) up to 1 GiB; a multipart upload of 1 GiB parts beyond.
  WriterOptions options;
  options.part_size = std::clamp<uint64_t>(data.size(), options.part_size, PartLayout::kMaxBase);
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, StartWrite(key, options));
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, writer->layout().PartCount(data.size()));
  for (uint32_t i = 0; i + 1 < count; ++i) {
    CAIRN_RETURN_IF_ERROR(
        writer->WritePart(i, data.subspan(writer->layout().Offset(i), writer->layout().Size(i))));
  }
  const uint64_t tail_start = count == 0 ? 0 : writer->layout().Offset(count - 1);
  return writer->Commit(data.size(), data.subspan(tail_start)).status();
}

StatusOr<std::shared_ptr<UnderStorage>> OpenUnderStorage(std::string_view uri,
                                                         const UfsOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(Uri parsed, ParseUri(uri));
  if (parsed.scheme == "file") {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LocalUnderStorage> local,
                           LocalUnderStorage::Open(parsed.path));
    return Throttle(std::shared_ptr<UnderStorage>(std::move(local)), options);
  }
  if (parsed.scheme == "s3") {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<S3UnderStorage> s3,
                           S3UnderStorage::Create(parsed, options, s3::ProcessEnv()));
    CAIRN_ASSIGN_OR_RETURN(auto throttled,
                           Throttle(std::shared_ptr<UnderStorage>(std::move(s3)), options));
    RetryOptions retry;
    retry.max_retries = options.max_retries;
    return std::shared_ptr<UnderStorage>(
        std::make_shared<RetryingUnderStorage>(std::move(throttled), retry));
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
