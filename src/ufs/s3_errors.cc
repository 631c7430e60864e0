#include "ufs/s3_errors.h"

#include <curl/curl.h>

#include "ufs/s3_xml.h"

namespace cairn::ufs::s3 {
namespace {

std::string Describe(long http_status, const S3ErrorBody& err) {
  std::string out = "HTTP " + std::to_string(http_status);
  if (!err.code.empty()) out += " " + err.code;
  if (!err.message.empty()) out += ": " + err.message;
  if (!err.request_id.empty()) out += " (request id " + err.request_id + ")";
  return out;
}

std::string Head(const RequestContext& ctx) {
  return std::string(ctx.operation) + " " + std::string(ctx.resource);
}

}  // namespace

Status StatusFromHttp(long http_status, std::string_view body, const RequestContext& ctx) {
  S3ErrorBody err = ParseS3Error(body);
  std::string what = Describe(http_status, err);
  const std::string& code = err.code;
  if (http_status == 404) {
    if (code == "NoSuchBucket") {
      return NotFoundError("bucket '" + std::string(ctx.bucket) + "' does not exist at " +
                           std::string(ctx.endpoint) + " (" + what + ")");
    }
    return NotFoundError("no such object " + std::string(ctx.resource) + " (" + what + ")");
  }
  if (http_status == 403 || code == "ExpiredToken" || code == "InvalidToken") {
    return PermissionDeniedError(Head(ctx) + " refused: " + what + "; check credentials (source: " +
                                 std::string(ctx.credentials_source) + ") and bucket policy");
  }
  if (http_status == 412) {
    return FailedPreconditionError(std::string(ctx.resource) +
                                   " changed (precondition failed: " + what + ")");
  }
  if (http_status == 301 || http_status == 307 || code == "PermanentRedirect") {
    return InvalidArgumentError(Head(ctx) + ": " + what + "; bucket '" + std::string(ctx.bucket) +
                                "' is served by another endpoint or region than " +
                                std::string(ctx.endpoint));
  }
  // Another conditional write of the key was in flight (AWS): retrying gets the real verdict.
  if (code == "RequestTimeout" || code == "ConditionalRequestConflict" || http_status == 429 ||
      http_status >= 500) {
    return UnavailableError(Head(ctx) + " at " + std::string(ctx.endpoint) +
                            " failed transiently: " + what);
  }
  if (code == "AuthorizationHeaderMalformed") {
    return InvalidArgumentError(Head(ctx) + ": " + what + " (is the region right?)");
  }
  if (http_status >= 400 && http_status < 500) {
    return InvalidArgumentError(Head(ctx) + " rejected: " + what);
  }
  return InternalError(Head(ctx) + ": unexpected response " + what);
}

Status StatusFromCurl(int curl_code, std::string_view detail, const RequestContext& ctx,
                      long timeout_ms) {
  auto code = static_cast<CURLcode>(curl_code);
  std::string why = detail.empty() ? curl_easy_strerror(code) : std::string(detail);
  std::string head = Head(ctx) + " at " + std::string(ctx.endpoint);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceededError(head + " timed out (limit " + std::to_string(timeout_ms) +
                                   " ms): " + why);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return UnavailableError("cannot reach S3 endpoint: " + head + ": " + why);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return InvalidArgumentError(head + ": TLS verification failed: " + why);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return InvalidArgumentError(head + ": bad URL: " + why);
    case CURLE_OUT_OF_MEMORY:
      return ResourceExhaustedError(head + ": " + why);
    default:
      return UnavailableError(head + " failed: " + why + " (curl code " +
                              std::to_string(curl_code) + ")");
  }
}

}  // namespace cairn::ufs::s3
