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
#include "ufs/part_layout.h"

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
  // The prefix (ending in '/') names a directory that exists even if nothing is under it: a
  // folder, or an S3 "dir/" marker object (which is not listed as an object).
  bool directory_exists = false;
};

// What a write requires of the object already under its key at the moment it commits. Checked
// atomically with the commit where the store can (memory; S3 servers that honour If-None-Match /
// If-Match on PUT and CompleteMultipartUpload; a folder's exclusive create); where it cannot,
// just before it, which leaves a window that docs/consistency.md describes.
struct WriteCondition {
  enum class Kind { kNone, kAbsent, kVersion };
  Kind kind = Kind::kNone;
  std::string version;  // kVersion: the version the writer last saw.

  bool operator==(const WriteCondition&) const = default;
  static WriteCondition None() { return {}; }
  // Exclusive create: fails with AlreadyExists if the key holds an object.
  static WriteCondition Absent() { return {Kind::kAbsent, {}}; }
  // Replace what was read: fails with FailedPrecondition if the object is gone or has another
  // version.
  static WriteCondition Version(std::string v) { return {Kind::kVersion, std::move(v)}; }
};

struct RenameOptions {
  // Non-empty: the source must still have this version, else FailedPrecondition.
  std::string expected_version;
  // kNone replaces whatever the destination holds; kAbsent fails with AlreadyExists when it holds
  // an object (atomically on folders and memory; S3: a HEAD just before the copy, a window).
  // kVersion: InvalidArgument.
  WriteCondition condition;
};

struct WriterOptions {
  // Base of the part layout (part_layout.h); S3 stores refuse less than 5 MiB.
  uint64_t part_size = 8 << 20;
  WriteCondition condition;
};

// An object being written in parts, laid out by PartLayout(part_size). Nothing appears under the
// key until Commit succeeds, and then the whole object appears at once (S3: one
// CompleteMultipartUpload or one PUT; folders: rename of a synced temp file). A writer that is
// destroyed without a successful Commit aborts (best effort: a failure to abort is logged, and
// leftover multipart uploads are for the bucket's lifecycle rule to collect). A writer must not
// outlive the store that made it.
//
// Thread-safety: WritePart may run concurrently for different parts, never for the same part
// (which of two uploads of one part the store keeps last is not knowable); Commit and Abort must
// not overlap with WritePart or with each other.
class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;

  virtual const PartLayout& layout() const = 0;

  // Stores full part `index` (data.size() == layout().Size(index)); writing a part again
  // replaces it (a part rewritten after it went up is sent again). The final part of the object
  // is not written here: it comes with Commit. InvalidArgument for a bad index or size;
  // FailedPrecondition after Commit or Abort; the store's errors otherwise (transient ones are
  // retried by RetryingUnderStorage's writer).
  virtual Status WritePart(uint32_t index, std::span<const char> data) = 0;

  // Makes the object `size` bytes long: the full parts before the final one, all written, then
  // `tail`, the final part's bytes (size - layout().Offset(count - 1) of them; empty for an empty
  // object). Returns the new object's info (its version is what a later Read expects).
  // InvalidArgument for a tail of the wrong length; FailedPrecondition when an earlier part was
  // never written, when a part past the final one was written (an object that shrank below
  // parts already written must be written again by a new writer: radosgw, for one, refuses to
  // complete an upload that leaves a part out), or when the object under the key no longer has
  // condition.version;
  // AlreadyExists when the condition is kAbsent and the key holds an object. A failure after
  // which the object may be in place all the same (the request that commits it went out and
  // its answer was lost, or a step after it failed) is marked Status::outcome_unknown(); on an
  // unmarked failure the key is as it was. May be called again after a transient error; a
  // Commit whose earlier attempt did land (its reply was lost) reports success where the store
  // lets it tell.
  virtual StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) = 0;

  // Discards everything written (S3: AbortMultipartUpload; folders: the temp file). Idempotent;
  // FailedPrecondition after a successful Commit.
  virtual Status Abort() = 0;

  // Replaces the condition the commit will check (a worker whose other writer of the same key
  // committed a moment ago expects that version now). Not concurrently with Commit.
  virtual void SetCondition(WriteCondition condition) = 0;

  // Creates now what the upload needs in the store (S3: the multipart upload; folders: the
  // temp file) instead of with the first part, so that UploadToken names it before any data
  // goes there (a caller records the token first). Idempotent; the store's errors.
  // Default: nothing to create.
  virtual Status Begin() { return Status::Ok(); }

  // What UnderStorage::AbortUpload needs to discard what this writer has put in the store if
  // its process dies before Commit or Abort (S3: the multipart upload's id; folders: the temp
  // file's name); empty while it has put nothing there that a commit would not take (before
  // its first part, and after Commit or Abort). Thread-safe. Default: empty.
  virtual std::string UploadToken() const { return ""; }
};

// Forwards every call to `target`; subclass it to add retries, limits or counting to a writer.
class ObjectWriterWrapper : public ObjectWriter {
 public:
  explicit ObjectWriterWrapper(std::unique_ptr<ObjectWriter> target) : target_(std::move(target)) {}
  const PartLayout& layout() const override { return target_->layout(); }
  Status WritePart(uint32_t index, std::span<const char> data) override {
    return target_->WritePart(index, data);
  }
  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    return target_->Commit(size, tail);
  }
  Status Abort() override { return target_->Abort(); }
  void SetCondition(WriteCondition condition) override {
    target_->SetCondition(std::move(condition));
  }
  std::string UploadToken() const override { return target_->UploadToken(); }
  Status Begin() override { return target_->Begin(); }

 protected:
  ObjectWriter* target() { return target_.get(); }

 private:
  std::unique_ptr<ObjectWriter> target_;
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

  // Starts writing `key` (see ObjectWriter). Cheap: S3 starts a multipart upload only when the
  // first full part is written, so a small object costs one PUT at Commit. InvalidArgument for a
  // bad key or part size (S3: below 5 MiB); checks the condition only at Commit.
  virtual StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                             const WriterOptions& options) = 0;

  // Creates or replaces `key` with `data` through StartWrite: one part (one S3 PUT) up to 1 GiB,
  // parts of 1 GiB beyond. For small objects and tests.
  Status Write(std::string_view key, std::span<const char> data);

  // Removes an object; NotFound if absent.
  virtual Status Delete(std::string_view key) = 0;

  // Moves the object `from` to `to` (replacing what `to` holds, per options.condition) and
  // returns the object now under `to`. Atomic for `to`: a reader never sees a partial object
  // under it. Folders and memory: one step (rename(2)). S3: a server-side copy (CopyObject;
  // UploadPartCopy parts past the store's copy threshold), then a delete of `from`; a failure or
  // crash between the two leaves both names with the same bytes. NotFound when `from` holds no
  // object; FailedPrecondition when its version is not options.expected_version; InvalidArgument
  // for from == to, a bad key, or `to` inside `from`. Directories: folders rename them (`to`
  // must not exist or be an empty folder); S3 and memory answer Unimplemented (a directory there
  // is many objects, not one name).
  virtual StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                                      const RenameOptions& options) = 0;

  // Creates the empty directory `key` (S3: a zero-byte "key/" marker object, so that it lists
  // and stats as a directory while empty). AlreadyExists when `key` is an object or a directory;
  // NotFound when a folder's parent does not exist (S3 has no parents to check).
  virtual Status MakeDir(std::string_view key) = 0;

  // Removes the empty directory `key`. NotFound when there is none (S3: no marker and nothing
  // under the prefix); FailedPrecondition ("not empty") when anything is under it;
  // InvalidArgument when `key` is an object (not a directory).
  virtual Status RemoveDir(std::string_view key) = 0;

  // Discards what a writer of `key` left in the store when its process died, named by the
  // writer's UploadToken (S3: AbortMultipartUpload; folders: the temp file). OK when nothing
  // is left (aborted, committed, or collected already); InvalidArgument for a token this store
  // never makes; Unimplemented when the store cannot (then a lifecycle rule must collect it).
  // Default: OK (a store whose writers leave nothing behind).
  virtual Status AbortUpload(std::string_view key, std::string_view token) { return Status::Ok(); }
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
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override {
    return target_->StartWrite(key, options);
  }
  Status Delete(std::string_view key) override { return target_->Delete(key); }
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override {
    return target_->Rename(from, to, options);
  }
  Status MakeDir(std::string_view key) override { return target_->MakeDir(key); }
  Status RemoveDir(std::string_view key) override { return target_->RemoveDir(key); }
  Status AbortUpload(std::string_view key, std::string_view token) override {
    return target_->AbortUpload(key, token);
  }

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
  // Renames of objects larger than this copy in UploadPartCopy parts of copy_part_size (S3's
  // CopyObject takes at most 5 GiB); tests lower both to exercise the multipart copy.
  uint64_t multipart_copy_threshold = 5ull << 30;
  uint64_t copy_part_size = 1ull << 30;
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
