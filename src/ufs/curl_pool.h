// HttpClient: blocking HTTP/1.1 requests over a bounded pool of libcurl easy handles.
//
// Each easy handle keeps its own keep-alive connection, so the pool bounds both concurrency and
// open connections at max_connections; a caller that finds every handle busy waits for one.
// Handles are reset (curl_easy_reset keeps the live connection and DNS cache) and fully
// re-configured for every request, so no option leaks from one request into the next.
// Requests are signed with AWS SigV4 by libcurl (CURLOPT_AWS_SIGV4) when credentials are given;
// libcurl signs the URL path/query verbatim (see s3_url.h) and every header the caller adds,
// and uses a caller-supplied x-amz-content-sha256 header as the payload hash.
//
// Thread-safety: Perform may be called from any number of threads. CURLOPT_NOSIGNAL is set, so
// timeouts never raise signals in a multi-threaded process.
#ifndef CAIRN_UFS_CURL_POOL_H_
#define CAIRN_UFS_CURL_POOL_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace cairn::ufs::s3 {

struct HttpRequest {
  std::string method;                // "GET", "HEAD", "PUT", "POST", "DELETE".
  std::string url;                   // Absolute, already canonical (s3_url.h).
  std::vector<std::string> headers;  // "Name: value" lines; all of them are signed.
  std::span<const char> upload;      // PUT/POST body (borrowed for the duration of Perform).
  // When non-empty, a 2xx response body is written here instead of HttpResponse::body, up to
  // sink.size() bytes; extra bytes end the transfer early (still a success).
  std::span<char> sink;
  // Bytes to drop from the front of a 200 (not 206) body before filling the sink: a server that
  // ignores Range sends the whole object, and the caller wanted it from this offset.
  uint64_t skip_if_full_body = 0;
  long timeout_ms = 30000;  // Whole-request limit.
};

struct HttpResponse {
  long status = 0;
  std::string body;  // The body when it did not go to the sink (errors, listings).
  std::map<std::string, std::string> headers;  // Lowercased names, trimmed values.
  uint64_t sink_bytes = 0;                     // Bytes written to the sink.
  // The header's value, or "" if absent. `name` must be lowercase.
  std::string Header(const std::string& name) const;
};

// How a request failed on the way (HttpClient::Perform).
struct TransportError {
  int curl_code = 0;  // A CURLcode; 0 when the exchange completed (any HTTP status).
  // Whether any byte of the request left this process (set for every request, failed or not).
  // When false the server cannot have acted on it (it could not be reached: a refused or
  // timed-out connect, a name that did not resolve, a TLS handshake that failed); when true it
  // may have, whatever the error says.
  bool request_sent = false;
};

struct HttpClientOptions {
  int max_connections = 64;
  long connect_timeout_ms = 3000;
  // Signing: empty access_key means unsigned (anonymous) requests.
  std::string access_key;
  std::string secret_key;
  std::string region = "us-east-1";
  std::string service = "s3";
  // Bodies of non-sink responses larger than this fail the request (protects memory from a
  // misbehaving server); ListObjectsV2 pages are well under 1 MiB.
  size_t max_body_bytes = 16 << 20;
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Performs one request and returns the response for any HTTP status (the caller maps non-2xx).
  // A transport failure returns the libcurl code and error text through `transport` / the
  // status message: Internal with the code in `transport->curl_code` (`transport` non-null) so
  // the caller can map it with its own context (s3_errors.h). `*transport` is reset on entry.
  StatusOr<HttpResponse> Perform(const HttpRequest& request, TransportError* transport)
      EXCLUDES(mu_);

 private:
  void* Acquire() EXCLUDES(mu_);
  void Release(void* handle) EXCLUDES(mu_);

  const HttpClientOptions options_;
  Mutex mu_;
  CondVar available_;
  std::vector<void*> idle_ GUARDED_BY(mu_);  // CURL* handles ready for reuse.
  int created_ GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_CURL_POOL_H_
