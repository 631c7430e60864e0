// SigV4 header signing for the requests libcurl cannot sign (pure code, no I/O).
//
// libcurl 7.88 (Debian 12) builds the canonical headers of AWS SigV4 by sorting whole
// "name:value" lines, so when one header's name is a prefix of another's (x-amz-copy-source and
// x-amz-copy-source-range or -if-match), '-' sorts before ':' and the longer name comes first;
// S3 and radosgw sort by name and refuse the signature (curl pull request 14370, fixed in
// curl 8.10). HttpClient signs such requests itself with SignV4 and leaves the rest to libcurl.
//
// Thread-safety: pure functions.
#ifndef CAIRN_UFS_S3_SIGV4_H_
#define CAIRN_UFS_S3_SIGV4_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::ufs::s3 {

// True when libcurl 7.88 would put `headers` ("Name: value" lines) in the wrong canonical
// order: some header name is a proper prefix of another, followed by '-' there.
bool CurlMisordersHeaders(const std::vector<std::string>& headers);

struct SigV4Input {
  std::string method;
  std::string url;  // "http://host:port/path?query": path and query exactly as sent.
  std::vector<std::string> headers;  // "Name: value"; must include x-amz-content-sha256.
  std::string access_key;
  std::string secret_key;
  std::string region;
  std::string service = "s3";
  int64_t unix_seconds = 0;  // The request time.
};

// The headers to add to the request: "Host: ...", "x-amz-date: ..." and "Authorization: ...".
// InvalidArgument for a URL without a scheme or host, or no x-amz-content-sha256 header.
StatusOr<std::vector<std::string>> SignV4(const SigV4Input& in);

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_S3_SIGV4_H_
