#include "ufs/s3_errors.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

namespace cairn::ufs::s3 {
namespace {

RequestContext Ctx() {
  return RequestContext{"GET", "s3://b/k", "b", "http://127.0.0.1:9", "environment"};
}

std::string Err(const std::string& code) {
  return "<Error><Code>" + code + "</Code><Message>msg</Message></Error>";
}

TEST(S3ErrorsTest, HttpStatusesMapToCodes) {
  struct Case {
    long status;
    std::string code;
    StatusCode want;
  };
  for (const Case& c : std::vector<Case>{
           {404, "NoSuchKey", StatusCode::kNotFound},
           {404, "NoSuchBucket", StatusCode::kNotFound},
           {404, "", StatusCode::kNotFound},
           {403, "AccessDenied", StatusCode::kPermissionDenied},
           {403, "SignatureDoesNotMatch", StatusCode::kPermissionDenied},
           {400, "ExpiredToken", StatusCode::kPermissionDenied},
           {412, "PreconditionFailed", StatusCode::kFailedPrecondition},
           {400, "InvalidArgument", StatusCode::kInvalidArgument},
           {400, "AuthorizationHeaderMalformed", StatusCode::kInvalidArgument},
           {400, "RequestTimeout", StatusCode::kUnavailable},
           {301, "PermanentRedirect", StatusCode::kInvalidArgument},
           {429, "", StatusCode::kUnavailable},
           {500, "InternalError", StatusCode::kUnavailable},
           {503, "SlowDown", StatusCode::kUnavailable},
       }) {
    Status st = StatusFromHttp(c.status, Err(c.code), Ctx());
    EXPECT_EQ(st.code(), c.want) << c.status << " " << c.code << ": " << st.ToString();
    if (!c.code.empty()) {
      EXPECT_NE(st.message().find(c.code), std::string::npos);
    }
  }
  Status denied = StatusFromHttp(403, "", Ctx());
  EXPECT_NE(denied.message().find("check credentials (source: environment)"), std::string::npos);
  Status bucket = StatusFromHttp(404, Err("NoSuchBucket"), Ctx());
  EXPECT_NE(bucket.message().find("bucket 'b' does not exist at http://127.0.0.1:9"),
            std::string::npos);
}

TEST(S3ErrorsTest, TransportErrorsNameTheEndpoint) {
  Status refused = StatusFromCurl(CURLE_COULDNT_CONNECT, "Connection refused", Ctx(), 1000);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("http://127.0.0.1:9"), std::string::npos);
  EXPECT_NE(refused.message().find("Connection refused"), std::string::npos);
  Status timeout = StatusFromCurl(CURLE_OPERATION_TIMEDOUT, "", Ctx(), 1500);
  EXPECT_EQ(timeout.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(timeout.message().find("1500 ms"), std::string::npos);
  EXPECT_EQ(StatusFromCurl(CURLE_COULDNT_RESOLVE_HOST, "", Ctx(), 1).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromCurl(CURLE_PEER_FAILED_VERIFICATION, "", Ctx(), 1).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::ufs::s3
