// S3UnderStorage: an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, s3rver, ...) as an
// under-storage, over libcurl.
//
// Root "s3://bucket/prefix": key "a/b" is object "prefix/a/b" ("a/b" without a prefix). Keys are
// passed through as S3 keys (UTF-8, any bytes but NUL; at most 1024 bytes with the prefix), so
// listing returns them exactly as stored. Object versions are ETags without quotes.
//
// Requests: Stat = HEAD; List = ListObjectsV2 (keys relative to the root, zero-byte "folder
// marker" keys ending in '/' are hidden); Read = ranged GET, split into parallel ranged GETs of
// parallel_read_part bytes when at least parallel_read_threshold bytes are asked for; writes:
// see s3_writer.cc (one PUT for an object of one part, else a multipart upload started at the
// first full part, with Content-MD5 on every body); Delete = HEAD then DELETE (S3 answers 204 for
// a missing key, the HEAD is what makes Delete return NotFound; a concurrent deleter can still
// race it). No retries here: OpenUnderStorage wraps this in RetryingUnderStorage.
//
// Version checks: with an expected version, every GET carries If-Match and the ETag of every
// response is compared with it too (some servers, e.g. s3rver, ignore If-Match);
// FailedPrecondition on a mismatch or a 412. A parallel read without an expected version still
// requires all its parts to carry the same ETag, so it never stitches two versions together.
//
// Thread-safety: safe for concurrent use; connections come from a bounded pool.
#ifndef CAIRN_UFS_S3_UFS_H_
#define CAIRN_UFS_S3_UFS_H_

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/thread_pool.h"
#include "common/uri.h"
#include "ufs/aws_credentials.h"
#include "ufs/curl_pool.h"
#include "ufs/s3_errors.h"
#include "ufs/s3_url.h"
#include "ufs/s3_xml.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

class S3UnderStorage : public UnderStorage {
 public:
  // Builds a store for `uri` (scheme "s3") with settings resolved per aws_credentials.h from
  // `options` and `env`. InvalidArgument for a bad endpoint, bucket or option value, or broken
  // credential files. Does not contact the server (see Probe).
  static StatusOr<std::unique_ptr<S3UnderStorage>> Create(const Uri& uri, const UfsOptions& options,
                                                          const s3::EnvLookup& env);
  ~S3UnderStorage() override;

  // "s3://bucket/prefix" (or "s3://bucket").
  std::string RootUri() const override;
  // HEAD. NotFound if absent (including "folders"), errors as in s3_errors.h.
  StatusOr<ObjectInfo> Stat(std::string_view key) override;
  // One ListObjectsV2 page. The token is S3's opaque continuation token.
  StatusOr<ListResult> List(const ListOptions& options) override;
  // Ranged GET(s); see the version-check rules above.
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override;
  // See s3_writer.cc. InvalidArgument for a bad key or a part size outside [5 MiB, 1 GiB].
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;
  // HEAD + DELETE; NotFound if absent.
  Status Delete(std::string_view key) override;
  // s3_namespace.cc: HEAD of `from` (and a one-key LIST of each name as a directory), a HEAD of
  // `to` for a kAbsent condition, a server-side copy carrying x-amz-copy-source-if-match with
  // the version the HEAD saw (CopyObject; above multipart_copy_threshold a multipart upload of
  // UploadPartCopy parts, aborted on failure), then HEAD + DELETE of `from`.
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override;
  // A zero-byte "key/" marker (PUT), after a HEAD and a one-key LIST show nothing there.
  Status MakeDir(std::string_view key) override;
  // A LIST of at most two keys under "key/", then a DELETE of the marker.
  Status RemoveDir(std::string_view key) override;
  // AbortMultipartUpload of the upload id `token` (a writer's UploadToken); 404 NoSuchUpload
  // is OK (gone already); Unimplemented where the server cannot abort (s3rver: 405).
  Status AbortUpload(std::string_view key, std::string_view token) override;

  // The resolved endpoint ("http://127.0.0.1:9000") and credential source, for diagnostics.
  std::string endpoint() const { return endpoint_.ToString(); }
  const std::string& credentials_source() const { return settings_.credentials_source; }

 private:
  class Writer;  // s3_writer.cc

  struct RangeResult {
    size_t bytes = 0;
    std::string etag;  // Stripped; empty when the response had none (e.g. 416).
  };

  S3UnderStorage(std::string bucket, std::string prefix, s3::AwsSettings settings,
                 s3::Endpoint endpoint, const UfsOptions& options);

  Status ValidateKey(std::string_view key) const;
  std::string FullKey(std::string_view key) const;
  std::string ResourceOf(std::string_view key) const;
  s3::RequestContext Context(std::string_view op, const std::string& resource) const;
  // Signing-related headers every request carries.
  std::vector<std::string> BaseHeaders(std::string_view payload_sha256) const;
  // Performs a request; maps transport errors (not HTTP statuses) to Status. The failure of a
  // request that changes something (any method but GET and HEAD) is marked
  // Status::outcome_unknown() when the request left this process: the server may have acted on
  // it, its answer lost.
  StatusOr<s3::HttpResponse> Send(s3::HttpRequest request, const s3::RequestContext& ctx);
  // Timeout for a request moving `bytes`: request_timeout_ms plus 1 s per MiB.
  long TimeoutFor(uint64_t bytes) const;

  // One ranged GET into `out`; checks the ETag against `expected_version` when non-empty.
  StatusOr<RangeResult> GetRange(std::string_view key, std::string_view expected_version,
                                 uint64_t offset, std::span<char> out);
  StatusOr<size_t> ParallelRead(std::string_view key, std::string_view expected_version,
                                uint64_t offset, std::span<char> out);
  ThreadPool& PartPool();

  // s3_namespace.cc.
  // What is under "key/": anything (objects or prefixes), and whether its marker exists.
  struct DirProbe {
    bool has_children = false;
    bool has_marker = false;
  };
  StatusOr<DirProbe> ProbeDir(std::string_view key, int max_keys);
  // A request on the object `full_key` (not a relative key: markers end in '/').
  s3::HttpRequest ObjectRequest(std::string method, const std::string& full_key,
                                std::string query) const;
  StatusOr<s3::CopyResult> CopyWhole(const std::string& to_resource, std::string_view to,
                                     const ObjectInfo& source);
  StatusOr<s3::CopyResult> CopyInParts(const std::string& to_resource, std::string_view to,
                                       const ObjectInfo& source);
  // After a CompleteMultipartUpload answer without an ETag: the copy as `to` holds it, or
  // Unavailable where `to` does not hold the object completed from `parts`.
  StatusOr<s3::CopyResult> CompletedCopy(std::string_view to, const ObjectInfo& source,
                                         const std::vector<s3::CompletedPart>& parts);
  std::vector<std::string> CopySourceHeaders(const ObjectInfo& source) const;

  const std::string bucket_;
  const std::string prefix_;  // Without leading/trailing '/'; "" for the whole bucket.
  const s3::AwsSettings settings_;
  const s3::Endpoint endpoint_;
  const std::string endpoint_text_;
  const bool path_style_;
  const long request_timeout_ms_;
  const uint64_t parallel_threshold_;
  const uint64_t parallel_part_;
  const int max_connections_;
  const uint64_t copy_threshold_;
  const uint64_t copy_part_;
  s3::HttpClient http_;
  std::once_flag pool_once_;
  std::unique_ptr<ThreadPool> part_pool_;  // Created on the first parallel read.
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_S3_UFS_H_
