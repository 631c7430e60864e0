// S3UnderStorage's namespace changes: Rename (server-side copy, then delete), MakeDir and
// RemoveDir (zero-byte "key/" marker objects).
//
// A directory on S3 is a prefix: it exists while a key is under it. MakeDir writes the marker
// "key/" so that an empty directory lists and stats as one (the convention of the AWS console,
// s3fs and rclone); List hides markers and reports the listed prefix's own marker as
// ListResult::directory_exists. Deleting the last file of a directory without a marker makes the
// directory disappear, as on every S3 file system.
//
// Rename copies with x-amz-copy-source-if-match set to the ETag the HEAD of `from` returned, so a
// source overwritten between the HEAD and the copy fails the copy (412) instead of moving the
// new bytes under a stale version (servers that ignore the header, s3rver, leave that window
// open). The copy is atomic for `to` (CopyObject, or CompleteMultipartUpload of the copied parts);
// the delete of `from` that follows is a second step.
#include <spdlog/spdlog.h>

#include <charconv>
#include <optional>

#include "ufs/s3_digest.h"
#include "ufs/s3_ufs.h"
#include "ufs/s3_xml.h"

namespace cairn::ufs {
namespace {

// The HTTP status S3 would have given an <Error> in a 200 copy answer.
long HttpStatusOfCopyError(const s3::S3ErrorBody& error) {
  if (error.code == "PreconditionFailed") return 412;
  if (error.code == "NoSuchKey") return 404;
  if (error.code == "InternalError" || error.code == "SlowDown" ||
      error.code == "ServiceUnavailable") {
    return 503;
  }
  return 400;
}

// The ETag S3 gives the object completed from `parts` (quoted hex MD5s), or nullopt where a
// part's ETag is not an MD5.
std::optional<std::string> ExpectedMultipartETag(const std::vector<s3::CompletedPart>& parts) {
  std::vector<s3::Md5Digest> md5s;
  for (const s3::CompletedPart& part : parts) {
    std::string_view hex = part.etag;
    if (hex.size() == 34 && hex.front() == '"' && hex.back() == '"') hex = hex.substr(1, 32);
    if (hex.size() != 32) return std::nullopt;
    s3::Md5Digest md5;
    for (size_t i = 0; i < md5.size(); ++i) {
      auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, md5[i], 16);
      if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
    }
    md5s.push_back(md5);
  }
  return s3::MultipartETag(md5s);
}

}  // namespace

s3::HttpRequest S3UnderStorage::ObjectRequest(std::string method, const std::string& full_key,
                                              std::string query) const {
  s3::HttpRequest req;
  req.method = std::move(method);
  req.url = s3::ObjectUrl(endpoint_, bucket_, path_style_, full_key, query);
  req.headers = BaseHeaders(s3::kEmptySha256);
  req.timeout_ms = TimeoutFor(0);
  return req;
}

StatusOr<S3UnderStorage::DirProbe> S3UnderStorage::ProbeDir(std::string_view key, int max_keys) {
  ListOptions probe;
  probe.prefix = std::string(key) + "/";
  probe.max_keys = max_keys;
  CAIRN_ASSIGN_OR_RETURN(ListResult listed, List(probe));
  return DirProbe{!listed.objects.empty() || !listed.common_prefixes.empty(),
                  listed.directory_exists};
}

std::vector<std::string> S3UnderStorage::CopySourceHeaders(const ObjectInfo& source) const {
  std::vector<std::string> headers = BaseHeaders(s3::kEmptySha256);
  headers.push_back("x-amz-copy-source: /" + bucket_ + "/" +
                    s3::UriEncode(FullKey(source.key), /*keep_slash=*/true));
  if (!source.version.empty()) {
    headers.push_back("x-amz-copy-source-if-match: \"" + source.version + "\"");
  }
  return headers;
}

StatusOr<s3::CopyResult> S3UnderStorage::CopyWhole(const std::string& to_resource,
                                                   std::string_view to, const ObjectInfo& source) {
  s3::RequestContext ctx = Context("CopyObject", to_resource);
  s3::HttpRequest req = ObjectRequest("PUT", FullKey(to), "");
  req.headers = CopySourceHeaders(source);
  req.headers.push_back("x-amz-metadata-directive: COPY");
  // The server copies while we wait: allow for the bytes it moves.
  req.timeout_ms = TimeoutFor(source.size);
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  if (resp.status != 200) return s3::StatusFromHttp(resp.status, resp.body, ctx);
  s3::S3ErrorBody error;
  StatusOr<s3::CopyResult> copied = s3::ParseCopyResult(resp.body, /*part=*/false, &error);
  if (!copied.ok() && !error.code.empty()) {
    return s3::StatusFromHttp(HttpStatusOfCopyError(error), resp.body, ctx);
  }
  if (!copied.ok())
    return UnavailableError("CopyObject " + to_resource + ": " + copied.status().message());
  return copied;
}

StatusOr<s3::CopyResult> S3UnderStorage::CopyInParts(const std::string& to_resource,
                                                     std::string_view to,
                                                     const ObjectInfo& source) {
  const std::string full_to = FullKey(to);
  s3::RequestContext create_ctx = Context("CreateMultipartUpload", to_resource);
  s3::HttpRequest create = ObjectRequest("POST", full_to, "uploads=");
  create.headers.push_back("Content-Type: application/octet-stream");
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse created, Send(std::move(create), create_ctx));
  if (created.status != 200) return s3::StatusFromHttp(created.status, created.body, create_ctx);
  StatusOr<std::string> id = s3::ParseInitiateMultipartUpload(created.body);
  if (!id.ok()) {
    return UnavailableError("CreateMultipartUpload " + to_resource + ": " + id.status().message());
  }
  auto abort = [&]() {
    s3::RequestContext ctx = Context("AbortMultipartUpload", to_resource);
    StatusOr<s3::HttpResponse> r =
        Send(ObjectRequest("DELETE", full_to, s3::CanonicalQuery({{"uploadId", *id}})), ctx);
    if (!r.ok() || (r->status != 204 && r->status != 200 && r->status != 404)) {
      spdlog::warn("abort of the copy upload of {} failed; a lifecycle rule must remove it",
                   to_resource);
    }
  };
  std::vector<s3::CompletedPart> parts;
  for (uint64_t offset = 0; offset < source.size; offset += copy_part_) {
    const uint64_t last = std::min(source.size, offset + copy_part_) - 1;
    const uint32_t number = static_cast<uint32_t>(parts.size() + 1);
    s3::RequestContext ctx = Context("UploadPartCopy", to_resource);
    s3::HttpRequest req = ObjectRequest(
        "PUT", full_to,
        s3::CanonicalQuery({{"partNumber", std::to_string(number)}, {"uploadId", *id}}));
    req.headers = CopySourceHeaders(source);
    req.headers.push_back("x-amz-copy-source-range: bytes=" + std::to_string(offset) + "-" +
                          std::to_string(last));
    req.timeout_ms = TimeoutFor(last + 1 - offset);
    StatusOr<s3::HttpResponse> resp = Send(std::move(req), ctx);
    Status failed;
    if (!resp.ok()) {
      failed = resp.status();
    } else if (resp->status != 200) {
      failed = s3::StatusFromHttp(resp->status, resp->body, ctx);
    } else {
      s3::S3ErrorBody error;
      StatusOr<s3::CopyResult> part = s3::ParseCopyResult(resp->body, /*part=*/true, &error);
      if (part.ok()) {
        // Quoted, as S3 returns a part's ETag and SDKs send it back.
        parts.push_back({number, "\"" + part->etag + "\""});
        continue;
      }
      failed =
          error.code.empty()
              ? UnavailableError("UploadPartCopy " + to_resource + ": " + part.status().message())
              : s3::StatusFromHttp(HttpStatusOfCopyError(error), resp->body, ctx);
    }
    abort();
    return failed;
  }
  const std::string body = s3::BuildCompleteMultipartUpload(parts);
  s3::RequestContext ctx = Context("CompleteMultipartUpload", to_resource);
  s3::HttpRequest complete =
      ObjectRequest("POST", full_to, s3::CanonicalQuery({{"uploadId", *id}}));
  complete.headers = BaseHeaders(s3::Sha256Hex(std::span<const char>(body.data(), body.size())));
  complete.headers.push_back("Content-Type: application/xml");
  complete.upload = std::span<const char>(body.data(), body.size());
  StatusOr<s3::HttpResponse> resp = Send(std::move(complete), ctx);
  Status failed;
  if (!resp.ok()) {
    failed = resp.status();
  } else if (resp->status != 200) {
    failed = s3::StatusFromHttp(resp->status, resp->body, ctx);
  } else {
    s3::S3ErrorBody error;
    StatusOr<std::string> etag = s3::ParseCompleteMultipartUpload(resp->body, &error);
    if (etag.ok()) {
      s3::CopyResult result;
      result.etag = std::move(etag).value();
      StatusOr<int64_t> date = s3::ParseHttpDate(resp->Header("date"));
      if (date.ok()) result.mtime_ns = *date;
      return result;
    }
    if (!error.code.empty()) {
      failed = s3::StatusFromHttp(HttpStatusOfCopyError(error), resp->body, ctx);
    } else {
      // radosgw (Ceph 16) answers the completion of copied parts with an empty <ETag>; a cut
      // answer also leaves the outcome open. Look at what `to` holds.
      StatusOr<s3::CopyResult> completed = CompletedCopy(to, source, parts);
      if (completed.ok()) return completed;
      failed = UnavailableError("CompleteMultipartUpload " + to_resource + ": " +
                                etag.status().message());
    }
  }
  abort();
  return failed;
}

StatusOr<s3::CopyResult> S3UnderStorage::CompletedCopy(
    std::string_view to, const ObjectInfo& source, const std::vector<s3::CompletedPart>& parts) {
  CAIRN_ASSIGN_OR_RETURN(ObjectInfo object, Stat(to));
  // The ETag a multipart object gets from its parts' MD5s tells our upload from anything else
  // under `to`; where a part's ETag is not an MD5, only the "-<part count>" suffix can.
  std::optional<std::string> expected = ExpectedMultipartETag(parts);
  const bool ours = object.size == source.size &&
                    (expected ? object.version == *expected
                              : object.version.ends_with("-" + std::to_string(parts.size())));
  if (!ours) return UnavailableError(ResourceOf(to) + " does not hold the completed copy");
  s3::CopyResult result;
  result.etag = std::move(object.version);
  result.mtime_ns = object.mtime_ns;
  return result;
}

StatusOr<ObjectInfo> S3UnderStorage::Rename(std::string_view from, std::string_view to,
                                            const RenameOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(from));
  CAIRN_RETURN_IF_ERROR(ValidateKey(to));
  const std::string from_resource = ResourceOf(from);
  const std::string to_resource = ResourceOf(to);
  if (from == to) return InvalidArgumentError("rename of " + from_resource + " onto itself");
  if (options.condition.kind == WriteCondition::Kind::kVersion) {
    return InvalidArgumentError("a rename takes no version condition on its destination");
  }
  StatusOr<ObjectInfo> source = Stat(from);
  if (!source.ok()) {
    if (source.status().code() != StatusCode::kNotFound) return source.status();
    CAIRN_ASSIGN_OR_RETURN(DirProbe dir, ProbeDir(from, 1));
    if (dir.has_children || dir.has_marker) {
      return UnimplementedError(from_resource +
                                " is a directory: S3 has no directory rename (it would be a copy "
                                "of every object under it)");
    }
    return source.status();
  }
  if (!options.expected_version.empty() && source->version != options.expected_version) {
    return FailedPreconditionError(from_resource + " changed: expected version " +
                                   options.expected_version + ", found " + source->version);
  }
  CAIRN_ASSIGN_OR_RETURN(DirProbe target_dir, ProbeDir(to, 1));
  if (target_dir.has_children || target_dir.has_marker) {
    return InvalidArgumentError(to_resource + " is a directory");
  }
  if (options.condition.kind == WriteCondition::Kind::kAbsent) {
    StatusOr<ObjectInfo> existing = Stat(to);
    if (existing.ok()) return AlreadyExistsError(to_resource + " already exists");
    if (existing.status().code() != StatusCode::kNotFound) return existing.status();
  }
  CAIRN_ASSIGN_OR_RETURN(s3::CopyResult copied, source->size > copy_threshold_
                                                    ? CopyInParts(to_resource, to, *source)
                                                    : CopyWhole(to_resource, to, *source));
  Status deleted = Delete(from);
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) {
    return Status(deleted.code(),
                  "copied " + from_resource + " to " + to_resource +
                      " but could not delete the old name (both exist now): " + deleted.message());
  }
  ObjectInfo info;
  info.key = std::string(to);
  info.size = source->size;
  info.version = std::move(copied.etag);
  info.mtime_ns = copied.mtime_ns != 0 ? copied.mtime_ns : source->mtime_ns;
  return info;
}

Status S3UnderStorage::MakeDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  const std::string resource = ResourceOf(key);
  StatusOr<ObjectInfo> object = Stat(key);
  if (object.ok()) return AlreadyExistsError(resource + " already exists (a file)");
  if (object.status().code() != StatusCode::kNotFound) return object.status();
  CAIRN_ASSIGN_OR_RETURN(DirProbe dir, ProbeDir(key, 1));
  if (dir.has_children || dir.has_marker) {
    return AlreadyExistsError(resource + " already exists (a directory)");
  }
  const std::string marker = FullKey(key) + "/";
  s3::RequestContext ctx = Context("PUT", resource + "/");
  s3::HttpRequest req = ObjectRequest("PUT", marker, "");
  req.headers.push_back("Content-Type: application/x-directory");
  req.headers.push_back("Content-MD5: " + s3::Base64(s3::Md5({})));
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  if (resp.status != 200) return s3::StatusFromHttp(resp.status, resp.body, ctx);
  return Status::Ok();
}

Status S3UnderStorage::RemoveDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  const std::string resource = ResourceOf(key);
  CAIRN_ASSIGN_OR_RETURN(DirProbe dir, ProbeDir(key, 2));
  if (dir.has_children) return FailedPreconditionError("directory " + resource + " is not empty");
  if (!dir.has_marker) {
    StatusOr<ObjectInfo> object = Stat(key);
    if (object.ok()) return InvalidArgumentError(resource + " is not a directory");
    if (object.status().code() != StatusCode::kNotFound) return object.status();
    return NotFoundError("no such directory " + resource);
  }
  s3::RequestContext ctx = Context("DELETE", resource + "/");
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp,
                         Send(ObjectRequest("DELETE", FullKey(key) + "/", ""), ctx));
  if (resp.status != 204 && resp.status != 200) {
    return s3::StatusFromHttp(resp.status, resp.body, ctx);
  }
  return Status::Ok();
}

}  // namespace cairn::ufs
