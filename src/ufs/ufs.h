// UnderStorage: the seam between Cairn and the data lake (a POSIX folder, an S3-compatible bucket).
//
// Keys are relative to the root the storage was opened on ("train/part-0001.tar"), use '/' as the
// separator and never start with '/'. Directories are implicit prefixes ending in '/'.
//
// Thread-safety: every implementation is safe for concurrent use by many threads.
// Errors (see common/status.h): NotFound for a missing object, FailedPrecondition when an
// expected version no longer matches (the object changed), Unavailable/DeadlineExceeded for
// transient remote failures (already retried by RetryingUnderStorage where used),
// PermissionDenied for refused credentials, InvalidArgument for malformed requests.
#ifndef CAIRN_UFS_UFS_H_
#define CAIRN_UFS_UFS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::ufs {

struct ObjectInfo {
  std::string key;  // Relative key; for directories ends without '/'.
  uint64_t size = 0;
  // Identifies the content: the S3 ETag (quotes stripped), or "<size>-<mtime_ns>" for files.
  // Two reads that carry the same version see the same bytes.
  std::string version;
  int64_t mtime_ns = 0;  // Last modification, nanoseconds since the Unix epoch.
  bool is_dir = false;
};

struct ListOptions {
  std::string prefix;              // Only keys starting with this ("dir/" lists one folder).
  std::string delimiter = "/";     // Group keys by this into common prefixes; empty = recursive.
  std::string continuation_token;  // From a previous ListResult; empty to start.
  int max_keys = 1000;             // Page size (1..1000).
};

struct ListResult {
  std::vector<ObjectInfo> objects;           // Files directly under the prefix (or all, recursive).
  std::vector<std::string> common_prefixes;  // "dir/sub/" entries when a delimiter was given.
  std::string next_token;                    // Non-empty when more results follow.
};

class UnderStorage {
 public:
  virtual ~UnderStorage() = default;

  // Normalised URI of the root ("s3://bucket/prefix", "file:///data"); part of every cache key.
  virtual std::string RootUri() const = 0;

  // Metadata of one object. NotFound if absent (directories are not objects).
  virtual StatusOr<ObjectInfo> Stat(std::string_view key) = 0;

  // One page of a listing, sorted by key.
  virtual StatusOr<ListResult> List(const ListOptions& options) = 0;

  // Reads up to out.size() bytes at `offset` into `out`; returns bytes read (short only at end
  // of object). If `expected_version` is non-empty and the object's version differs, returns
  // FailedPrecondition and no bytes are to be trusted. Reading at offset >= size returns 0.
  virtual StatusOr<size_t> Read(std::string_view key, std::string_view expected_version,
                                uint64_t offset, std::span<char> out) = 0;

  // Creates or replaces an object (used by tests and, later, checkpoint writes).
  virtual Status Write(std::string_view key, std::span<const char> data) = 0;

  // Removes an object; NotFound if absent.
  virtual Status Delete(std::string_view key) = 0;
};

// Forwards every call to `target`; subclass it to add retries, metrics or fault injection.
class UnderStorageWrapper : public UnderStorage {
 public:
  explicit UnderStorageWrapper(std::shared_ptr<UnderStorage> target) : target_(std::move(target)) {}
  std::string RootUri() const override { return target_->RootUri(); }
  StatusOr<ObjectInfo> Stat(std::string_view key) override { return target_->Stat(key); }
  StatusOr<ListResult> List(const ListOptions& options) override { return target_->List(options); }
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override {
    return target_->Read(key, expected_version, offset, out);
  }
  Status Write(std::string_view key, std::span<const char> data) override {
    return target_->Write(key, data);
  }
  Status Delete(std::string_view key) override { return target_->Delete(key); }

 protected:
  UnderStorage* target() { return target_.get(); }

 private:
  std::shared_ptr<UnderStorage> target_;
};

// Options for opening an under-storage from a URI. Empty strings mean "use the default" (for S3:
// environment variables AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN /
// AWS_REGION / AWS_ENDPOINT_URL, then ~/.aws/credentials and ~/.aws/config for AWS_PROFILE;
// the full precedence is in ufs/aws_credentials.h). Only the S3 store uses these; file:// roots
// ignore them.
class UfsLimiter;  // ufs/ufs_limiter.h

struct UfsOptions {
  std::string endpoint;    // "http://127.0.0.1:9000"; empty = AWS.
  std::string region;      // Default "us-east-1".
  std::string access_key;  // With secret_key; both empty = look further down the chain.
  std::string secret_key;
  std::string session_token;
  std::string profile;     // AWS profile name for the credential files.
  bool path_style = true;  // Path-style addressing (required by most S3-compatible servers).
  int max_retries = 5;     // For Unavailable/DeadlineExceeded, with exponential backoff+jitter.
  int connect_timeout_ms = 3000;
  // Limit of one HTTP request, extended by 1 s per MiB it carries (so big parts and PUTs are
  // not cut off on slower links).
  int request_timeout_ms = 30000;
  int max_connections = 64;  // Pooled keep-alive connections (also bounds parallel parts).
  uint64_t parallel_read_threshold = 8 << 20;  // Reads at least this large are split...
  uint64_t parallel_read_part = 4 << 20;       // ...into ranged GETs of this size, in parallel.
  // Source protection (docs/ufs.md): this mount's own caps, enforced in this process (0 = none),
  // and limiters shared with other mounts (a worker-wide cap). Every request, and every retry,
  // passes all of them.
  int max_concurrency = 0;
  uint64_t max_bytes_per_second = 0;
  std::vector<std::shared_ptr<UfsLimiter>> shared_limiters;
};

// Opens "file:///abs/path" or "s3://bucket/prefix". InvalidArgument for an unknown scheme or a
// malformed URI; NotFound if a file root does not exist. Does not contact S3 (see Probe). An S3
// store comes wrapped in RetryingUnderStorage (options.max_retries); a local one does not (its
// errors are not transient). With caps or shared limiters, a ThrottledUnderStorage sits under
// the retrier (so each retry is throttled and SlowDown answers shrink the concurrency).
// Thread-safe; the caller shares ownership of the result.
StatusOr<std::shared_ptr<UnderStorage>> OpenUnderStorage(std::string_view uri,
                                                         const UfsOptions& options);

// Checks that the storage answers (one small List). Maps failures to clear messages:
// Unavailable/DeadlineExceeded (endpoint unreachable), PermissionDenied (wrong credentials),
// NotFound (no bucket or folder); other codes come back with "probe of <root>" context.
Status Probe(UnderStorage& ufs);

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_UFS_H_
