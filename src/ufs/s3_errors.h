// Mapping of S3 failures (HTTP status + error document, or a transport error) onto Status codes
// with messages an operator can act on. Pure functions; thread-safe.
//
//   404 NoSuchBucket                 NotFound ("bucket ... does not exist at <endpoint>")
//   404 (NoSuchKey, HEAD, other)      NotFound ("no such object s3://b/k")
//   403                              PermissionDenied ("... check credentials (source: ...)")
//   400 ExpiredToken                 PermissionDenied
//   400 RequestTimeout               Unavailable (the server timed our connection out; retry)
//   400 AuthorizationHeaderMalformed InvalidArgument (usually a wrong region)
//   400 other, 405, 411, 413, ...    InvalidArgument with the S3 code and message
//   301/307 (redirect)               InvalidArgument ("bucket is in another region/endpoint")
//   412                              FailedPrecondition (If-Match failed: the object changed)
//   429, 5xx (SlowDown, ...)         Unavailable (retryable)
//   connect/resolve/send/recv errors Unavailable naming the endpoint
//   timeouts                         DeadlineExceeded naming the endpoint and the limit
//   TLS verification failures        InvalidArgument (retrying cannot help)
#ifndef CAIRN_UFS_S3_ERRORS_H_
#define CAIRN_UFS_S3_ERRORS_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn::ufs::s3 {

// What the failed request was about, for the message.
struct RequestContext {
  std::string_view operation;  // "HEAD", "GET", "LIST", "PUT", "DELETE".
  std::string_view resource;   // "s3://bucket/key" or "s3://bucket".
  std::string_view bucket;
  std::string_view endpoint;  // "http://127.0.0.1:9000".
  std::string_view credentials_source;
};

// Status for a completed HTTP exchange that did not succeed (status outside 2xx). `body` is the
// (possibly empty) response body.
Status StatusFromHttp(long http_status, std::string_view body, const RequestContext& ctx);

// Status for a libcurl transport failure. `curl_code` is a CURLcode; `detail` is the error
// buffer (may be empty); `timeout_ms` the limit that applied to the request.
Status StatusFromCurl(int curl_code, std::string_view detail, const RequestContext& ctx,
                      long timeout_ms);

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_S3_ERRORS_H_
