#include "ufs/s3_ufs.h"

#include <charconv>
#include <cstdio>

#include "ufs/s3_digest.h"
#include "ufs/s3_xml.h"
#include "ufs/ufs_keys.h"

namespace cairn::ufs {
namespace {

constexpr size_t kMaxKeyBytes = 1024;  // S3's key length limit.

bool ParseU64(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

Status ValidateBucket(std::string_view bucket, bool path_style) {
  if (!path_style && !s3::IsDnsCompatibleBucket(bucket)) {
    return InvalidArgumentError("bucket '" + std::string(bucket) +
                                "' cannot be addressed virtual-hosted style; use path_style");
  }
  if (bucket.size() < 3 || bucket.size() > 255) {
    return InvalidArgumentError("bucket name '" + std::string(bucket) + "' has a bad length");
  }
  for (char c : bucket) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_';
    if (!ok) {
      return InvalidArgumentError("bucket name '" + std::string(bucket) +
                                  "' has an invalid character");
    }
  }
  return Status::Ok();
}

Status ValidateNumbers(const UfsOptions& o) {
  if (o.max_connections < 1) return InvalidArgumentError("max_connections must be >= 1");
  if (o.connect_timeout_ms < 1) return InvalidArgumentError("connect_timeout_ms must be >= 1");
  if (o.request_timeout_ms < 1) return InvalidArgumentError("request_timeout_ms must be >= 1");
  if (o.parallel_read_part < 1) return InvalidArgumentError("parallel_read_part must be >= 1");
  if (o.max_retries < 0) return InvalidArgumentError("max_retries must be >= 0");
  if (o.copy_part_size < (5ull << 20) || o.copy_part_size > (5ull << 30)) {
    return InvalidArgumentError("copy_part_size must be within [5 MiB, 5 GiB]");
  }
  if (o.multipart_copy_threshold > (5ull << 30)) {
    return InvalidArgumentError("multipart_copy_threshold must be at most 5 GiB");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<S3UnderStorage>> S3UnderStorage::Create(const Uri& uri,
                                                                 const UfsOptions& options,
                                                                 const s3::EnvLookup& env) {
  if (uri.scheme != "s3") {
    return InvalidArgumentError("not an s3:// URI: '" + uri.ToString() + "'");
  }
  CAIRN_RETURN_IF_ERROR(ValidateBucket(uri.authority, options.path_style));
  CAIRN_RETURN_IF_ERROR(ValidateNumbers(options));
  std::string prefix = uri.path;
  while (!prefix.empty() && prefix.front() == '/') prefix.erase(prefix.begin());
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.find('\0') != std::string::npos) {
    return InvalidArgumentError("S3 prefix contains a NUL byte");
  }
  CAIRN_ASSIGN_OR_RETURN(s3::AwsSettings settings, s3::ResolveAwsSettings(options, env));
  // These end up in header lines; a stray newline from a config file must not split one.
  for (const std::string* v : {&settings.credentials.access_key, &settings.credentials.secret_key,
                               &settings.credentials.session_token, &settings.region}) {
    if (v->find_first_of("\r\n") != std::string::npos) {
      return InvalidArgumentError("S3 credentials or region (from " + settings.credentials_source +
                                  ") contain a line break");
    }
  }
  CAIRN_ASSIGN_OR_RETURN(s3::Endpoint endpoint, s3::ParseEndpoint(settings.endpoint));
  return std::unique_ptr<S3UnderStorage>(new S3UnderStorage(
      uri.authority, std::move(prefix), std::move(settings), std::move(endpoint), options));
}

S3UnderStorage::S3UnderStorage(std::string bucket, std::string prefix, s3::AwsSettings settings,
                               s3::Endpoint endpoint, const UfsOptions& options)
    : bucket_(std::move(bucket)),
      prefix_(std::move(prefix)),
      settings_(std::move(settings)),
      endpoint_(std::move(endpoint)),
      endpoint_text_(endpoint_.ToString()),
      path_style_(options.path_style),
      request_timeout_ms_(options.request_timeout_ms),
      parallel_threshold_(options.parallel_read_threshold),
      parallel_part_(options.parallel_read_part),
      max_connections_(options.max_connections),
      copy_threshold_(options.multipart_copy_threshold),
      copy_part_(options.copy_part_size),
      http_(s3::HttpClientOptions{
          .max_connections = options.max_connections,
          .connect_timeout_ms = options.connect_timeout_ms,
          .access_key = settings_.credentials.access_key,
          .secret_key = settings_.credentials.secret_key,
          .region = settings_.region,
      }) {}

S3UnderStorage::~S3UnderStorage() = default;

std::string S3UnderStorage::RootUri() const {
  return "s3://" + bucket_ + (prefix_.empty() ? "" : "/" + prefix_);
}

Status S3UnderStorage::ValidateKey(std::string_view key) const {
  if (key.empty()) return InvalidArgumentError("empty object key");
  if (key.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("key contains a NUL byte");
  }
  if (key.front() == '/') {
    return InvalidArgumentError("key '" + std::string(key) + "' must not start with '/'");
  }
  // S3 itself takes "a/../b" literally, but a path-normalising proxy or gateway in front of it
  // would resolve it, possibly outside the mount's prefix: such keys are never sent.
  for (size_t start = 0; start <= key.size();) {
    size_t slash = key.find('/', start);
    std::string_view comp =
        key.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (comp == "." || comp == "..") {
      return InvalidArgumentError("key '" + std::string(key) +
                                  "' has a '.' or '..' component (refused: it could resolve "
                                  "outside the mount)");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (FullKey(key).size() > kMaxKeyBytes) {
    return InvalidArgumentError("key '" + std::string(key) + "' is longer than S3's 1024 bytes");
  }
  return Status::Ok();
}

std::string S3UnderStorage::FullKey(std::string_view key) const {
  if (prefix_.empty()) return std::string(key);
  return prefix_ + "/" + std::string(key);
}

std::string S3UnderStorage::ResourceOf(std::string_view key) const {
  return "s3://" + bucket_ + "/" + FullKey(key);
}

s3::RequestContext S3UnderStorage::Context(std::string_view op, const std::string& resource) const {
  return s3::RequestContext{op, resource, bucket_, endpoint_text_, settings_.credentials_source};
}

std::vector<std::string> S3UnderStorage::BaseHeaders(std::string_view payload_sha256) const {
  std::vector<std::string> headers;
  if (settings_.credentials.anonymous()) return headers;
  // libcurl 7.88 does not add this header; S3 requires it, and libcurl signs its value as the
  // payload hash.
  headers.push_back("x-amz-content-sha256: " + std::string(payload_sha256));
  if (!settings_.credentials.session_token.empty()) {
    headers.push_back("x-amz-security-token: " + settings_.credentials.session_token);
  }
  return headers;
}

long S3UnderStorage::TimeoutFor(uint64_t bytes) const {
  return request_timeout_ms_ + static_cast<long>(bytes >> 20) * 1000;
}

StatusOr<s3::HttpResponse> S3UnderStorage::Send(s3::HttpRequest request,
                                                const s3::RequestContext& ctx) {
  s3::TransportError transport;
  StatusOr<s3::HttpResponse> r = http_.Perform(request, &transport);
  if (r.ok()) return r;
  Status failed = r.status();
  if (transport.curl_code != 0) {
    failed = s3::StatusFromCurl(transport.curl_code, failed.message(), ctx, request.timeout_ms);
  }
  const bool changes = request.method != "GET" && request.method != "HEAD";
  return changes && transport.request_sent ? failed.WithOutcomeUnknown() : failed;
}

StatusOr<ObjectInfo> S3UnderStorage::Stat(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  std::string resource = ResourceOf(key);
  s3::RequestContext ctx = Context("HEAD", resource);
  s3::HttpRequest req;
  req.method = "HEAD";
  req.url = s3::ObjectUrl(endpoint_, bucket_, path_style_, FullKey(key));
  req.headers = BaseHeaders(s3::kEmptySha256);
  req.timeout_ms = TimeoutFor(0);
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  if (resp.status != 200) return s3::StatusFromHttp(resp.status, resp.body, ctx);
  ObjectInfo info;
  info.key = std::string(key);
  if (!ParseU64(resp.Header("content-length"), info.size)) {
    return UnavailableError("HEAD " + resource + " at " + endpoint_text_ +
                            " returned no valid Content-Length");
  }
  info.version = s3::StripETagQuotes(resp.Header("etag"));
  StatusOr<int64_t> mtime = s3::ParseHttpDate(resp.Header("last-modified"));
  if (mtime.ok()) info.mtime_ns = *mtime;
  return info;
}

StatusOr<ListResult> S3UnderStorage::List(const ListOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(int page_size, EffectivePageSize(options));
  if (options.prefix.find('\0') != std::string::npos ||
      options.delimiter.find('\0') != std::string::npos) {
    return InvalidArgumentError("list prefix or delimiter contains a NUL byte");
  }
  if (!options.prefix.empty() && options.prefix.front() == '/') {
    return InvalidArgumentError("list prefix must not start with '/'");
  }
  const std::string root_dir = prefix_.empty() ? "" : prefix_ + "/";
  std::vector<std::pair<std::string, std::string>> params = {
      {"list-type", "2"}, {"max-keys", std::to_string(page_size)}};
  std::string full_prefix = root_dir + options.prefix;
  if (!full_prefix.empty()) params.emplace_back("prefix", full_prefix);
  if (!options.delimiter.empty()) params.emplace_back("delimiter", options.delimiter);
  if (!options.continuation_token.empty()) {
    params.emplace_back("continuation-token", options.continuation_token);
  }
  std::string resource = "s3://" + bucket_ + "/" + full_prefix;
  s3::RequestContext ctx = Context("LIST", resource);
  s3::HttpRequest req;
  req.method = "GET";
  req.url = s3::ObjectUrl(endpoint_, bucket_, path_style_, "", s3::CanonicalQuery(params));
  req.headers = BaseHeaders(s3::kEmptySha256);
  req.timeout_ms = TimeoutFor(0);
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  if (resp.status != 200) return s3::StatusFromHttp(resp.status, resp.body, ctx);
  StatusOr<s3::ListObjectsPage> page = s3::ParseListObjectsV2(resp.body);
  if (!page.ok()) {
    // A cut or garbled body is most likely a proxy or connection problem: worth a retry.
    return UnavailableError("LIST " + resource + " at " + endpoint_text_ + ": " +
                            page.status().message());
  }
  ListResult result;
  for (ObjectInfo& info : page->objects) {
    if (!std::string_view(info.key).starts_with(root_dir)) continue;
    info.key.erase(0, root_dir.size());
    // Zero-byte "folder" markers (ours, from MakeDir, or a console's) are not objects.
    if (info.key == options.prefix && !info.key.empty() && info.key.back() == '/') {
      result.directory_exists = true;
    }
    if (info.key.empty() || info.key.back() == '/') continue;
    result.objects.push_back(std::move(info));
  }
  for (std::string& cp : page->common_prefixes) {
    if (!std::string_view(cp).starts_with(root_dir) || cp.size() == root_dir.size()) continue;
    result.common_prefixes.push_back(cp.substr(root_dir.size()));
  }
  if (page->truncated) result.next_token = std::move(page->next_token);
  return result;
}

StatusOr<size_t> S3UnderStorage::Read(std::string_view key, std::string_view expected_version,
                                      uint64_t offset, std::span<char> out) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  // The version goes into an If-Match header: only ETag characters, so that a version taken
  // from an untrusted peer cannot inject header lines into a request signed with our keys.
  for (char c : expected_version) {
    if (c < 0x21 || c > 0x7e || c == '"') {
      return InvalidArgumentError("expected version of '" + std::string(key) + "' is not an ETag");
    }
  }
  if (out.empty()) return size_t{0};
  if (out.size() >= parallel_threshold_ && out.size() > parallel_part_) {
    return ParallelRead(key, expected_version, offset, out);
  }
  CAIRN_ASSIGN_OR_RETURN(RangeResult r, GetRange(key, expected_version, offset, out));
  return r.bytes;
}

StatusOr<S3UnderStorage::RangeResult> S3UnderStorage::GetRange(std::string_view key,
                                                               std::string_view expected_version,
                                                               uint64_t offset,
                                                               std::span<char> out) {
  std::string resource = ResourceOf(key);
  s3::RequestContext ctx = Context("GET", resource);
  s3::HttpRequest req;
  req.method = "GET";
  req.url = s3::ObjectUrl(endpoint_, bucket_, path_style_, FullKey(key));
  req.headers = BaseHeaders(s3::kEmptySha256);
  // Always an explicit first-last range: suffix ranges ("bytes=-N") are mishandled by some
  // servers (s3rver).
  req.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                        std::to_string(offset + out.size() - 1));
  if (!expected_version.empty()) {
    req.headers.push_back("If-Match: \"" + std::string(expected_version) + "\"");
  }
  req.sink = out;
  req.skip_if_full_body = offset;
  req.timeout_ms = TimeoutFor(out.size());
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  if (resp.status == 416) {
    // The range starts at or past the end. Still honour the version contract.
    if (!expected_version.empty()) {
      CAIRN_ASSIGN_OR_RETURN(ObjectInfo info, Stat(key));
      if (info.version != expected_version) {
        return FailedPreconditionError(resource + " changed: expected version " +
                                       std::string(expected_version) + ", found " + info.version);
      }
    }
    return RangeResult{};
  }
  if (resp.status != 200 && resp.status != 206) {
    return s3::StatusFromHttp(resp.status, resp.body, ctx);
  }
  RangeResult r;
  r.bytes = resp.sink_bytes;
  r.etag = s3::StripETagQuotes(resp.Header("etag"));
  // Servers that ignore If-Match (s3rver) would otherwise hand out the new version's bytes.
  if (!expected_version.empty() && r.etag != expected_version) {
    return FailedPreconditionError(resource + " changed: expected version " +
                                   std::string(expected_version) + ", server returned " +
                                   (r.etag.empty() ? "no ETag" : r.etag));
  }
  return r;
}

Status S3UnderStorage::Delete(std::string_view key) {
  // S3 answers 204 whether or not the key existed; the HEAD gives Delete its NotFound.
  CAIRN_RETURN_IF_ERROR(Stat(key).status());
  std::string resource = ResourceOf(key);
  s3::RequestContext ctx = Context("DELETE", resource);
  s3::HttpRequest req;
  req.method = "DELETE";
  req.url = s3::ObjectUrl(endpoint_, bucket_, path_style_, FullKey(key));
  req.headers = BaseHeaders(s3::kEmptySha256);
  req.timeout_ms = TimeoutFor(0);
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  if (resp.status != 204 && resp.status != 200) {
    return s3::StatusFromHttp(resp.status, resp.body, ctx);
  }
  return Status::Ok();
}

}  // namespace cairn::ufs
