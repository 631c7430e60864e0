// Request URLs for S3, built directly in SigV4 canonical form.
//
// libcurl (7.88) signs the path and query string exactly as they appear in the URL it is given:
// it neither re-encodes nor sorts them. So the URL path is the canonical URI (every key byte
// outside A-Z a-z 0-9 - _ . ~ and '/' percent-encoded once, uppercase hex) and the query string is
// the canonical query (parameters sorted by name, names and values encoded the same way, '/'
// included). What goes on the wire is then exactly what S3 re-derives when it checks the
// signature. Requests must also be sent with CURLOPT_PATH_AS_IS so that "." and ".." segments of
// keys are not collapsed.
//
// Pure functions; thread-safe.
#ifndef CAIRN_UFS_S3_URL_H_
#define CAIRN_UFS_S3_URL_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cairn::ufs::s3 {

// Percent-encodes every byte except A-Z a-z 0-9 '-' '_' '.' '~' (and '/' when keep_slash), as
// "%XX" with uppercase hex. UTF-8 is encoded byte by byte; a space becomes "%20", '+' "%2B".
std::string UriEncode(std::string_view s, bool keep_slash);

// Decodes "%XX" escapes ('+' stays '+'). InvalidArgument on a truncated or non-hex escape.
StatusOr<std::string> UriDecode(std::string_view s);

// "a=1&b=x%2Fy": parameters sorted by name (then value), each name and value UriEncode'd with
// '/' encoded. A parameter with an empty value renders as "name=".
std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params);

struct Endpoint {
  std::string scheme;     // "http" or "https".
  std::string host;       // Host, with ":port" when given ("127.0.0.1:9000", "[::1]:9000").
  std::string base_path;  // "" or a path prefix without trailing '/' ("/s3").
  std::string ToString() const { return scheme + "://" + host + base_path; }
};

// Parses "http(s)://host[:port][/path]". InvalidArgument for another scheme, an empty host, or
// a query/fragment.
StatusOr<Endpoint> ParseEndpoint(std::string_view url);

// Whether `bucket` can be addressed virtual-hosted style (a DNS label sequence).
bool IsDnsCompatibleBucket(std::string_view bucket);

// The URL of `key` in `bucket` (key "" addresses the bucket itself), path-style
// ("http://host/bucket/key") or virtual-hosted ("https://bucket.host/key"), with `query`
// (already canonical, without '?') appended when non-empty.
std::string ObjectUrl(const Endpoint& endpoint, std::string_view bucket, bool path_style,
                      std::string_view key, std::string_view query = "");

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_S3_URL_H_
