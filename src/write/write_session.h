// WriteSession: one file being written through Cairn, from its first byte to the object in the
// data lake (docs/write-path.md, decisions 3 to 5).
//
// Bytes land in a spool file on the worker's disk (sparse; writes at any offset, in any order,
// from several threads). As soon as every byte of a full part (ufs/part_layout.h) has been
// written, the part goes to the source in the background, read back from the spool, so a large
// checkpoint is mostly uploaded by the time it is closed and memory stays bounded (at most
// max_uploads_in_flight part buffers per session). A write into a part that already went up
// makes it dirty: it is sent again. Commit sends what is left (dirty parts, parts with holes,
// which read as zeros, and the final part) and makes the object visible in one step; nothing is
// visible under the key before. A file that ends small (options.whole_put_bytes) sends nothing
// early and goes up in one request at Commit.
//
// Failures: an early upload that fails (after the store's own retries) is not retried at once;
// Commit sends the part again, so a short outage while writing costs nothing. A Commit that
// fails returns the error (the write-through close reports it) and may be called again; Abort or
// destruction discards everything (the spool file and, on S3, the multipart upload). If the file
// shrank below parts already sent, Commit starts the upload over (radosgw cannot leave a sent
// part out; see ufs.h), counted in stats().writer_restarts.
//
// Thread-safety: Write and Truncate may be called concurrently (writes to overlapping ranges
// land in some order, as with pwrite); Commit and Abort wait for uploads in flight and refuse
// writes after they start. Commit holds the session's lock while it talks to the source: writes
// arriving meanwhile wait, then are refused. The session must outlive nothing it submitted: the
// destructor waits for its uploads. Lock order: mu_ only; uploads run on the pool without it.
#ifndef CAIRN_WRITE_WRITE_SESSION_H_
#define CAIRN_WRITE_WRITE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/thread_pool.h"
#include "ufs/ufs.h"
#include "write/written_ranges.h"

namespace cairn::write {

struct WriteSessionOptions {
  uint64_t part_size = 8 << 20;   // Base of the part layout (S3: at least 5 MiB).
  int max_uploads_in_flight = 4;  // Parts of this session being sent at once (>= 1).
  // Send full parts while the file is being written (write-through: the close has little left
  // to send). False: nothing goes up before Commit (write-back: the upload starts after the
  // close, and a rename before it would make parts already sent to the old name's key wasted
  // bytes, since an upload is bound to its key).
  bool upload_early = true;
  // A file at most this long when committed goes to the source in one request (S3: one PUT)
  // unless a part of it already went up, and parts go up early only once the file has grown past
  // it. A file that ends this small gains little from early parts (it is written in a moment)
  // and would pay for a multipart upload's extra requests and its reassembly in the store: a
  // 10 MiB close to s3rver took 139 ms as two parts, 64 ms as one PUT (docs/benchmarks.md).
  // Commit then holds the whole file in memory. 0: one request only for a file of one part, and
  // parts go up as soon as they are whole. At most ufs::PartLayout::kMaxBase.
  uint64_t whole_put_bytes = 0;
  // Start the disk write of the spool file's dirty pages each time this many bytes have been
  // written since the last start (sync_file_range(2), SYNC_FILE_RANGE_WRITE: it does not wait for
  // the disk), so that Seal's fdatasync finds little left to write: the disk works while the
  // file is being written, as RocksDB's bytes_per_sync does. 0: never (write-through sessions,
  // whose spool files need not reach the disk).
  uint64_t write_behind_bytes = 0;
  // Called in Commit once every part but the last is in the source, before the upload is
  // completed (under the session's lock; it must not call the session). The worker's crash
  // point "write-back-uploading" (common/crash_point.h). May be empty.
  std::function<void()> before_complete;
  ufs::WriteCondition condition;  // Checked when the object is committed.
  // Told when the session's writer has begun an upload in the source that a crash would leave
  // there (its ufs::ObjectWriter::UploadToken, once per writer: after ObjectWriter::Begin,
  // before its first part goes up), and when such an upload ended in a Commit or an Abort of this
  // session. (An upload aborted by the session's destructor is not reported: the worker's next
  // start aborts it again, which costs one request.) Called without the session's lock, on an
  // upload thread or the caller's; may block (the worker journals them). Either may be empty.
  std::function<void(const std::string& token)> on_upload_begun;
  std::function<void(const std::string& token)> on_upload_ended;
  // Keep a digest of the file as written (SpoolDigest below), made at Seal, and refuse to
  // commit bytes read back from the spool that do not match it: a spool file damaged on disk
  // after its fdatasync is never uploaded (write-back, whose files wait on disk). Each part is
  // hashed in the background once wholly written (read back while it is in the page cache), so
  // Seal hashes only the last part and parts written again since.
  bool digest = false;
  // Where the background hashes run (not owned; outlives the session). Null: Seal hashes every
  // part itself.
  ThreadPool* hash_pool = nullptr;
  // For Adopt: the digest Seal made before the restart (a journal's record). Commit refuses to
  // upload bytes that do not match it. For Reopen: the digest of the `size` bytes the file
  // starts with (a copy of a sealed spool file); Reopen refuses a file that does not match. Both
  // require `part_size` to be the one the digest was made with.
  std::optional<uint64_t> expected_digest;
};

struct WriteSessionStats {
  uint64_t parts_sent = 0;          // Full parts stored by the source (early or at Commit).
  uint64_t whole_puts = 0;          // Commits of a file of several parts in one request.
  uint64_t parts_sent_early = 0;    // Of those, sent before Commit.
  uint64_t parts_resent = 0;        // Sent again because they were written after going up.
  uint64_t bytes_sent = 0;          // Bytes of those parts.
  uint64_t upload_failures = 0;     // Part uploads that failed (sent again at Commit).
  uint64_t writer_restarts = 0;     // Uploads started over because the file shrank.
  uint64_t write_behinds = 0;       // Disk writes of the spool started early (write_behind_bytes).
  uint64_t parts_hashed_early = 0;  // Parts hashed in the background for the digest.
  uint64_t parts_hashed_at_seal = 0;  // Parts (or the last, short part) hashed by Seal itself.
};

// The digest of a file of `size` bytes under a part layout: XXH3-64 of the sequence of its part
// hashes (little-endian u64s), part i's hash being PartHash of its bytes (the last part cut at
// the end of the file). Independent of the order in which parts are hashed or uploaded.
uint64_t PartHash(std::span<const char> part);
uint64_t CombinePartHashes(const std::vector<uint64_t>& part_hashes);

// A spool file's digest and the part size it was made with (a sealed session's, as journaled).
struct SpoolDigest {
  uint64_t part_size = 0;
  uint64_t value = 0;
};

// PartHash of a part fed in pieces, for parts too large to hold at once: every piece but the
// last must be a multiple of kPartHashPiece bytes.
inline constexpr uint64_t kPartHashPiece = 4 << 20;
class PartHasher {
 public:
  // InvalidArgument for a piece after one that was not a multiple of kPartHashPiece.
  Status Update(std::span<const char> piece);
  uint64_t Finish() const;

 private:
  std::string piece_hashes_;
  bool ended_ = false;  // A short piece came: it was the last.
};

// Copies the first `size` bytes of `from_fd` (readable; bytes past its end read as zeros) into
// a new spool file in `spool_dir` and returns its path, for WriteSession::Reopen (the caller
// owns the file until then). The kernel copies (copy_file_range(2): no pass through user
// memory, and on file systems with reflinks such as XFS and btrfs the blocks are shared, not
// copied); where it cannot, a read-write loop. IoError (the new file is removed).
StatusOr<std::string> CopySpoolFile(int from_fd, uint64_t size, const std::string& spool_dir);

class WriteSession {
 public:
  // Starts writing `key` of `ufs` with a new spool file in `spool_dir` (which must exist, on the
  // worker's disk). Uploads run on `uploads` (shared by sessions; not owned; must outlive the
  // session). InvalidArgument for a bad key, part size or option; IoError if the spool file
  // cannot be created.
  static StatusOr<std::unique_ptr<WriteSession>> Create(std::shared_ptr<ufs::UnderStorage> ufs,
                                                        std::string key,
                                                        const std::string& spool_dir,
                                                        WriteSessionOptions options,
                                                        ThreadPool* uploads);
  // Takes over a spool file left by a write-back close before a restart (docs/write-path.md,
  // decision 6): the first `size` bytes of `spool_path` are the file, all written, none sent.
  // The session owns the file from now on (removes it when it goes). Corruption when the file
  // is shorter than `size` (its content is not what was made durable); IoError if it cannot be
  // opened. The session is sealed: only Commit and Abort are left.
  static StatusOr<std::unique_ptr<WriteSession>> Adopt(std::shared_ptr<ufs::UnderStorage> ufs,
                                                       std::string key, std::string spool_path,
                                                       uint64_t size, WriteSessionOptions options,
                                                       ThreadPool* uploads);
  // Continues a file whose first `size` bytes are in `spool_path`: the spool file of a committed
  // session that gives it up (KeepSpoolFile, then destroyed), or a CopySpoolFile. Every byte
  // counts as written and none as sent: the next Commit sends the whole file again (a source
  // has no append), and with options.upload_early its full parts start going up now. Unlike
  // Adopt, the session takes writes. Once it is returned, it owns the file and has cut it to
  // `size` (a shorter file is Corruption, as for Adopt); O(parts), no byte is copied. With
  // options.expected_digest, the file is read and hashed first (its parts shared between the
  // caller and options.hash_pool): Corruption if it does not hold the bytes the digest was made
  // of (a copy of a sealed file damaged on disk), and the hashes stand for the parts' bytes in
  // the next Seal's digest, so that bytes damaged later are not uploaded either. Errors as
  // Adopt; on an error the file stays the caller's.
  static StatusOr<std::unique_ptr<WriteSession>> Reopen(std::shared_ptr<ufs::UnderStorage> ufs,
                                                        std::string key, std::string spool_path,
                                                        uint64_t size, WriteSessionOptions options,
                                                        ThreadPool* uploads);
  ~WriteSession();
  WriteSession(const WriteSession&) = delete;
  WriteSession& operator=(const WriteSession&) = delete;

  // Writes `data` at `offset` (the file grows as needed; skipped ranges are holes of zeros).
  // InvalidArgument past the largest object the layout holds; ResourceExhausted for a disk
  // full or too many scattered ranges; FailedPrecondition once Commit or Abort started.
  Status Write(uint64_t offset, std::span<const char> data) EXCLUDES(mu_);
  // Sets the file's size (shorter: the rest is gone; longer: zeros). Errors as Write.
  Status Truncate(uint64_t size) EXCLUDES(mu_);
  uint64_t size() const EXCLUDES(mu_);
  // Reads the file as written so far into `out` from `offset` (ranges never written read as
  // zeros); returns the bytes read: fewer than out.size() at the end of the file, 0 past it.
  // Works in every state while the session exists (also after Commit, Seal or Abort: the spool
  // file stays until destruction). IoError if the spool file cannot be read.
  StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out) const EXCLUDES(mu_);

  // Refuses writes from now on and makes the spool file durable (fdatasync): after it returns
  // OK, the file survives a crash of the process or the machine (write-back's close). Early
  // uploads carry on. With options.digest, also makes the digest (digest()). IoError if the
  // disk cannot sync or the spool cannot be read back; idempotent.
  Status Seal() EXCLUDES(mu_);
  // The digest of the file as written (options.digest, after Seal) or as expected (Adopt's
  // options.expected_digest); nullopt otherwise.
  std::optional<uint64_t> digest() const EXCLUDES(mu_);
  uint64_t part_size() const { return layout_.base(); }

  // Sends every part not yet in the source and commits the object (see above). Returns the new
  // object's info. The errors of ObjectWriter::Commit (marked outcome_unknown() when the object
  // may be in the source all the same), or the first failed upload's (unmarked: a part puts
  // nothing under the key). With a
  // digest, Corruption when the bytes read back from the spool for the upload are not the ones
  // the digest was made of: nothing is committed, the upload is aborted, and spool_damaged()
  // says so (retrying cannot help: the spool file is kept for an operator, or dropped).
  StatusOr<ufs::ObjectInfo> Commit() EXCLUDES(mu_);
  bool spool_damaged() const EXCLUDES(mu_);
  // Discards the write. Idempotent; FailedPrecondition after a successful Commit.
  Status Abort() EXCLUDES(mu_);
  // Replaces the condition Commit checks (options.condition until then): the worker's other
  // writer of the same key committed, and this one now replaces that version.
  void SetCondition(ufs::WriteCondition condition) EXCLUDES(mu_);
  ufs::WriteCondition condition() const EXCLUDES(mu_);

  // The spool file outlives the session (a write-back journal still names it).
  void KeepSpoolFile() { keep_spool_ = true; }

  WriteSessionStats stats() const EXCLUDES(mu_);
  const std::string& key() const { return key_; }
  const std::string& spool_path() const { return spool_path_; }

 private:
  struct Part {
    uint64_t generation = 0;  // Bumped by every write that touches the part.
    bool sent = false;        // The source holds the part as of sent_generation.
    uint64_t sent_generation = 0;
    bool sending = false;
    uint64_t sent_hash = 0;  // PartHash of the bytes sent (valid while UpToDate).
    // The digest's hash of the part as written (options.digest), valid while hashed_generation
    // is the generation.
    bool hashed = false;
    bool hashing = false;
    uint64_t hashed_generation = 0;
    uint64_t hash = 0;
    bool UpToDate() const { return sent && sent_generation == generation; }
    bool HashCurrent() const { return hashed && hashed_generation == generation; }
  };

  WriteSession(std::shared_ptr<ufs::UnderStorage> ufs, std::string key, std::string spool_path,
               int spool_fd, ufs::PartLayout layout, WriteSessionOptions options,
               ThreadPool* uploads, std::unique_ptr<ufs::ObjectWriter> writer);
  // Adopt and Reopen: a session over the existing `spool_path`, at least `size` bytes long,
  // with nothing recorded as written yet.
  static StatusOr<std::unique_ptr<WriteSession>> OpenSpool(std::shared_ptr<ufs::UnderStorage> ufs,
                                                           std::string key, std::string spool_path,
                                                           uint64_t size,
                                                           WriteSessionOptions options,
                                                           ThreadPool* uploads);

  // Bumps the generation of the parts [first, last] and queues those now wholly written (once
  // the file may send parts early); with `hash`, starts the digest's hash of those (options_).
  void TouchParts(uint32_t first, uint32_t last, bool hash = true) REQUIRES(mu_);
  // Whether parts may go up before Commit now (options_.upload_early, whole_put_bytes).
  bool SendsEarly() const REQUIRES(mu_);
  // After the file grew from `old_size`: when that made it send parts early, queues every part
  // wholly written so far.
  void QueueOnceEarly(uint64_t old_size) REQUIRES(mu_);
  // Commit of the whole file in one request by a writer of one part (whole_put_bytes): reads the
  // file, checks it against the digest, commits.
  StatusOr<ufs::ObjectInfo> CommitWhole(std::vector<std::string>* ended) REQUIRES(mu_);
  // Starts uploads of queued parts up to the in-flight cap.
  void Pump() REQUIRES(mu_);
  // Runs on the upload pool.
  void Upload(uint32_t index, uint64_t generation, bool early) EXCLUDES(mu_);
  // Waits until no upload is in flight and none is queued.
  void WaitForUploads() REQUIRES(mu_);
  // Runs on the upload pool: the digest's hash of wholly written part `index`.
  void HashPart(uint32_t index, uint64_t generation) EXCLUDES(mu_);
  // PartHash of bytes [offset, offset + length) of the spool, read in bounded pieces.
  StatusOr<uint64_t> HashSpool(uint64_t offset, uint64_t length) const;
  // The PartHash of each part of the spool's first `size` bytes (the last part cut at `size`),
  // hashed by the calling thread and up to kPrefixHashHelpers tasks on options_.hash_pool.
  StatusOr<std::vector<uint64_t>> HashPrefix(uint64_t size) const EXCLUDES(mu_);
  // Reopen's check of the file against options_.expected_digest: the part hashes (Corruption on
  // a mismatch).
  StatusOr<std::vector<uint64_t>> CheckReopened(uint64_t size) const EXCLUDES(mu_);
  // Seal's part of the digest: waits for background hashes, hashes what they did not cover.
  Status MakeDigest() REQUIRES(mu_);
  // Commit's check of what goes to the source against the digest: `part_hashes` are the
  // PartHash of each part of the layout as sent. On a mismatch the spool is marked damaged and
  // the upload aborted (its token to `ended`): Corruption.
  Status CheckDigest(const std::vector<uint64_t>& part_hashes, std::vector<std::string>* ended)
      REQUIRES(mu_);
  Status ReadSpool(uint64_t offset, std::span<char> out) const;
  Status CheckOpen() const REQUIRES(mu_);
  // Counts `written` bytes; past options_.write_behind_bytes, starts the spool's disk write.
  void StartWriteBehind(uint64_t written);
  // Before the first part of writer `writer_generation` goes up: creates its upload and tells
  // on_upload_begun its token (if it has one), once per writer.
  Status BeginUpload(ufs::ObjectWriter* writer, uint64_t writer_generation) EXCLUDES(mu_);
  // Commit and Abort; the uploads they ended go to `ended` (reported after the lock).
  StatusOr<ufs::ObjectInfo> CommitLocked(std::vector<std::string>* ended) REQUIRES(mu_);
  Status AbortLocked(std::vector<std::string>* ended) REQUIRES(mu_);
  void ReportEnded(const std::vector<std::string>& ended) const EXCLUDES(mu_);

  const std::shared_ptr<ufs::UnderStorage> ufs_;
  const std::string key_;
  const std::string spool_path_;
  const int spool_fd_;
  const ufs::PartLayout layout_;
  const WriteSessionOptions options_;
  ThreadPool* const uploads_;
  std::atomic<bool> keep_spool_{false};
  std::atomic<uint64_t> unflushed_bytes_{0};  // Written since the last write-behind start.
  std::atomic<uint64_t> write_behinds_{0};

  mutable Mutex mu_;
  CondVar uploads_done_;
  std::unique_ptr<ufs::ObjectWriter> writer_ GUARDED_BY(mu_);
  std::map<uint32_t, Part> parts_ GUARDED_BY(mu_);
  std::set<uint32_t> queued_ GUARDED_BY(mu_);  // Wholly written, not up to date, not sending.
  WrittenRanges written_ GUARDED_BY(mu_);
  uint64_t size_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;
  int hashing_ GUARDED_BY(mu_) = 0;  // HashPart tasks on the pool.
  std::optional<uint64_t> digest_ GUARDED_BY(mu_);
  bool spool_damaged_ GUARDED_BY(mu_) = false;
  Status first_upload_error_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;  // Commit or Abort started: no more writes.
  bool committed_ GUARDED_BY(mu_) = false;
  bool aborted_ GUARDED_BY(mu_) = false;
  bool parts_submitted_ GUARDED_BY(mu_) = false;  // A part of writer_ went to the upload pool.
  ufs::WriteCondition condition_ GUARDED_BY(mu_);
  WriteSessionStats stats_ GUARDED_BY(mu_);
  std::string reported_token_ GUARDED_BY(mu_);      // Told on_upload_begun, not yet ended.
  uint64_t writer_generation_ GUARDED_BY(mu_) = 1;  // Bumped when writer_ is replaced.
  Mutex begin_mu_;  // Before mu_: BeginUpload's create-and-report, one at a time.
  uint64_t begun_generation_ GUARDED_BY(begin_mu_) = 0;  // The writer last begun and reported.
};

}  // namespace cairn::write

#endif  // CAIRN_WRITE_WRITE_SESSION_H_
