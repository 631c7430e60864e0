#include "ufs/curl_pool.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ctime>
#include <mutex>

#include "ufs/s3_sigv4.h"

namespace cairn::ufs::s3 {
namespace {

// curl_global_init is not thread-safe; run it once, before the first handle is created.
void EnsureCurlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Per-request state shared with the libcurl callbacks.
struct Transfer {
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  CURL* curl = nullptr;
  size_t max_body = 0;
  size_t upload_pos = 0;
  uint64_t skipped = 0;
  bool sink_full = false;       // We ended the transfer on purpose: the sink had all we wanted.
  bool body_too_large = false;  // We ended it because a non-sink body passed max_body.
};

constexpr size_t kLargeReceiveBuffer = 512 * 1024;  // libcurl's CURL_MAX_READ_SIZE (7.88).

size_t OnBody(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  const std::span<char> sink = t->request->sink;
  if (sink.empty() || status < 200 || status >= 300) {
    if (t->response->body.size() + n > t->max_body) {
      t->body_too_large = true;
      return 0;
    }
    t->response->body.append(ptr, n);
    return n;
  }
  std::string_view data(ptr, n);
  if (status == 200 && t->skipped < t->request->skip_if_full_body) {
    uint64_t drop = std::min<uint64_t>(data.size(), t->request->skip_if_full_body - t->skipped);
    t->skipped += drop;
    data.remove_prefix(drop);
  }
  uint64_t& filled = t->response->sink_bytes;
  size_t take = std::min<size_t>(sink.size() - filled, data.size());
  std::memcpy(sink.data() + filled, data.data(), take);
  filled += take;
  if (take < data.size()) {
    t->sink_full = true;
    return 0;  // Makes libcurl stop with CURLE_WRITE_ERROR, which Perform treats as success.
  }
  return n;
}

size_t OnHeader(char* buffer, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  size_t n = size * nitems;
  std::string_view line(buffer, n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    t->response->headers.clear();  // A new response (after "100 Continue") starts over.
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  t->response->headers[name] = std::string(value);
  return n;
}

size_t OnUpload(char* buffer, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const std::span<const char> body = t->request->upload;
  size_t n = std::min(size * nitems, body.size() - t->upload_pos);
  std::memcpy(buffer, body.data() + t->upload_pos, n);
  t->upload_pos += n;
  return n;
}

// Lets libcurl rewind the body when it must resend it (e.g. a connection reset before a reply).
int OnSeek(void* userdata, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(userdata);
  if (origin != SEEK_SET || offset < 0 ||
      static_cast<uint64_t>(offset) > t->request->upload.size()) {
    return CURL_SEEKFUNC_FAIL;
  }
  t->upload_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

std::string HttpResponse::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

HttpClient::HttpClient(HttpClientOptions options) : options_(std::move(options)) {
  EnsureCurlGlobalInit();
}

HttpClient::~HttpClient() {
  MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::Acquire() {
  {
    MutexLock lock(&mu_);
    int limit = std::max(1, options_.max_connections);
    available_.Wait(&mu_, [&]() REQUIRES(mu_) { return !idle_.empty() || created_ < limit; });
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
    ++created_;
  }
  CURL* h = curl_easy_init();
  if (h == nullptr) {
    MutexLock lock(&mu_);
    --created_;
    available_.NotifyOne();
  }
  return h;
}

void HttpClient::Release(void* handle) {
  {
    MutexLock lock(&mu_);
    idle_.push_back(handle);
  }
  available_.NotifyOne();
}

StatusOr<HttpResponse> HttpClient::Perform(const HttpRequest& request, TransportError* transport) {
  *transport = TransportError{};
  CURL* h = static_cast<CURL*>(Acquire());
  if (h == nullptr) return ResourceExhaustedError("curl_easy_init failed");
  curl_easy_reset(h);

  HttpResponse response;
  Transfer t;
  t.request = &request;
  t.response = &response;
  t.curl = h;
  t.max_body = options_.max_body_bytes;
  char error[CURL_ERROR_SIZE] = {0};
  // libcurl 7.88 signs some header sets wrongly (s3_sigv4.h): those requests are signed here.
  std::vector<std::string> lines = request.headers;
  const bool own_signature = !options_.access_key.empty() && CurlMisordersHeaders(lines);
  if (own_signature) {
    StatusOr<std::vector<std::string>> signed_lines = SignV4(SigV4Input{
        .method = request.method,
        .url = request.url,
        .headers = lines,
        .access_key = options_.access_key,
        .secret_key = options_.secret_key,
        .region = options_.region,
        .service = options_.service,
        .unix_seconds = static_cast<int64_t>(std::time(nullptr)),
    });
    if (!signed_lines.ok()) {
      Release(h);
      return signed_lines.status();
    }
    lines.insert(lines.end(), signed_lines->begin(), signed_lines->end());
  }
  struct curl_slist* headers = nullptr;
  for (const std::string& line : lines) headers = curl_slist_append(headers, line.c_str());

  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, options_.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, request.timeout_ms);
  // Keys may contain "." and ".." segments that must reach S3 verbatim.
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "cairn/0.1");
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  // Large bodies (page reads into a sink) are received in up to 512 KiB per recv() instead of
  // libcurl's 16 KiB: a cold read's profile was dominated by the socket lock and poll wake-ups
  // of thousands of small receives per MiB (docs/benchmarks.md, "Source read-ahead").
  if (request.sink.size() >= kLargeReceiveBuffer) {
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, static_cast<long>(kLargeReceiveBuffer));
  }
  if (headers != nullptr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  if (request.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, &OnUpload);
    curl_easy_setopt(h, CURLOPT_READDATA, &t);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, &OnSeek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.upload.size()));
  } else if (request.method == "POST") {
    // The body is borrowed for the call; libcurl reads it in place (no copy).
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.upload.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.upload.empty() ? "" : request.upload.data());
  } else if (request.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (!options_.access_key.empty() && !own_signature) {
    std::string sigv4 = "aws:amz:" + options_.region + ":" + options_.service;
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_AWS_SIGV4);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(h, CURLOPT_USERNAME, options_.access_key.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, options_.secret_key.c_str());
  }

  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  // The bytes of request headers written to the connection (libcurl counts them as they go).
  long request_bytes = 0;
  curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_bytes);
  transport->request_sent = request_bytes > 0;
  // Drop pointers into this stack frame before the handle goes back to the pool.
  curl_easy_reset(h);
  curl_slist_free_all(headers);
  Release(h);

  if (t.body_too_large) {
    return ResourceExhaustedError("response body of " + request.method + " " + request.url +
                                  " exceeds " + std::to_string(t.max_body) + " bytes");
  }
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && t.sink_full)) {
    transport->curl_code = static_cast<int>(rc);
    return InternalError(error[0] != '\0' ? std::string(error) : curl_easy_strerror(rc));
  }
  response.status = status;
  return response;
}

}  // namespace cairn::ufs::s3
