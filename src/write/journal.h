// WriteJournal: the write-back journal of one worker (docs/write-path.md, decision 6; the
// format is in docs/write-journal.md).
//
// An append-only file of records, each checksummed and made durable (fdatasync) before Append
// returns, so a write-back close answered OK survives kill -9 and power loss. Two kinds:
//   * kPending: a closed file waiting for its upload (path, spool file, size, condition);
//   * kDone: that file needs nothing more (committed, removed, or set aside as a conflict);
//   * kRenamed: that file now goes to another path, under another condition (a rename of a
//     file not yet uploaded: docs/write-path.md, decision 8);
//   * kUpload: an upload begun in a source (an S3 multipart upload, a folder's temp file) that a
//     crash would leave there; its kDone says it was committed or aborted;
//   * kSpoolSet: the journal's spool set, the random value the spool folders whose files it names
//     are stamped with (write/spool_folders.h); once per journal, kept by compaction.
// Open replays the file: the pending and upload records without a matching kDone (renamed as
// their last kRenamed says), in the order they were made. A torn tail (a crash in the middle of an
// append, which was never acknowledged) is cut off; a bad record before good ones is Corruption
// (the journal was damaged, not torn) and the worker refuses to start rather than drop acknowledged
// writes silently.
//
// The journal keeps its live (pending) records in memory too: once the file is past
// kCompactBytes and mostly dead records, Append rewrites it with the live ones only (temporary
// file, fsync, rename, fsync of the folder), so it does not grow without bound.
//
// Thread-safety: thread-safe (one lock; an Append holds it through its fdatasync).
#ifndef CAIRN_WRITE_JOURNAL_H_
#define CAIRN_WRITE_JOURNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "ufs/ufs.h"

namespace cairn::write {

struct JournalRecord {
  enum class Type : uint8_t { kPending = 1, kDone = 2, kRenamed = 3, kUpload = 4, kSpoolSet = 6 };
  // kEnded: of an upload record (committed or aborted; nothing of it is left in the source).
  enum class Outcome : uint8_t { kCommitted = 1, kRemoved = 2, kConflict = 3, kEnded = 4 };

  Type type = Type::kPending;
  uint64_t id = 0;  // > 0; unique within the journal. kSpoolSet: the set's value.
  // kPending (kRenamed: path and condition only):
  std::string path;               // Namespace path (normalised).
  std::string principal;          // Who wrote it (logs, status).
  std::string spool_path;         // The durable bytes.
  uint64_t size = 0;              // At most kMaxFileBytes.
  ufs::WriteCondition condition;  // What the commit expects of the source.
  int64_t closed_at_ms = 0;       // Wall clock (status: the oldest pending write).
  // The spool file's digest as written (WriteSession::digest) and the part size it was made
  // with, checked before the upload; digest_part_size 0: none (a record from before digests,
  // uploaded unchecked). Stored as record type 5 (docs/write-journal.md).
  uint64_t digest_part_size = 0;
  uint64_t digest = 0;
  // kDone:
  Outcome outcome = Outcome::kCommitted;
  std::string detail;  // The committed version, or why the file was set aside. kUpload: the
                       // writer's UploadToken (with `path`, the namespace path it writes).

  // Past any object a source takes (S3: 5 TiB); a record claiming more is damaged.
  static constexpr uint64_t kMaxFileBytes = 1ull << 50;

  bool operator==(const JournalRecord&) const = default;
};

// Serialised form (the payload of one record; exposed for the fuzzer and the tests).
std::string EncodeJournalRecord(const JournalRecord& record);
// Corruption for anything malformed (never a crash: the input may be damaged).
StatusOr<JournalRecord> DecodeJournalRecord(std::string_view payload);
// The frame the file holds for one record's payload: its length, the checksum of length and
// payload, the payload (docs/write-journal.md; exposed for the tests).
std::string FrameJournalPayload(std::string_view payload);

class WriteJournal {
 public:
  // Opens (or creates) the journal at `path` and replays it: `pending` gets the records still
  // pending, oldest first. Corruption as above; IoError when the file cannot be read or made.
  static StatusOr<std::unique_ptr<WriteJournal>> Open(const std::string& path,
                                                      std::vector<JournalRecord>* pending);
  ~WriteJournal();
  WriteJournal(const WriteJournal&) = delete;
  WriteJournal& operator=(const WriteJournal&) = delete;

  // Appends `record` and makes it durable. IoError (the disk is failing or full; or, for good,
  // once a failed append's bytes could not be cut off): the caller must not acknowledge what
  // the record stands for. InvalidArgument for a pending record whose id is in use, a renamed
  // record whose id is not pending, or a record too large. A renamed record with a new path
  // drops the other pending records of both paths (WriteBack::Retarget replaces them), as
  // replay does.
  Status Append(const JournalRecord& record) EXCLUDES(mu_);
  // Rewrites the file with the live records only (also done by Append when it pays).
  Status Compact() EXCLUDES(mu_);
  uint64_t bytes() const EXCLUDES(mu_);
  size_t live_records() const EXCLUDES(mu_);
  // The largest id of any record in the file as opened (new ids must be larger: the file may
  // still hold finished records, and ids are unique within it).
  uint64_t max_id_at_open() const { return max_id_at_open_; }
  // The journal's spool set (write/spool_folders.h); 0 until one is recorded (a new journal, or
  // one from before spool sets).
  uint64_t spool_set() const EXCLUDES(mu_);
  // Records `spool_set` (> 0) durably, once: InvalidArgument for a second, other value; IoError
  // as Append.
  Status RecordSpoolSet(uint64_t spool_set) EXCLUDES(mu_);
  const std::string& path() const { return path_; }

  // Largest payload of one record: paths are at most a few KiB.
  static constexpr uint32_t kMaxRecordBytes = 64 * 1024;
  static constexpr uint64_t kCompactBytes = 4 << 20;

 private:
  WriteJournal(std::string path, int fd, uint64_t bytes, std::map<uint64_t, JournalRecord> live,
               uint64_t max_id, uint64_t spool_set);
  Status CompactLocked() REQUIRES(mu_);
  // Writes `frame` at the end and makes it durable (undone if it fails; see broken_).
  Status AppendFrameLocked(const std::string& frame) REQUIRES(mu_);

  const std::string path_;
  const uint64_t max_id_at_open_;
  mutable Mutex mu_;
  int fd_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_);
  std::map<uint64_t, JournalRecord> live_ GUARDED_BY(mu_);  // Pending records by id.
  uint64_t spool_set_ GUARDED_BY(mu_);                      // 0: none recorded.
  // A failed append left bytes it could not cut off: no record may follow them.
  bool broken_ GUARDED_BY(mu_) = false;
  uint64_t live_bytes_ GUARDED_BY(mu_) = 0;  // Their frames' size.
  // A compaction's rename is not known durable (its folder sync failed): each append syncs
  // the folder before it counts, since a crash could still bring the old file back.
  bool folder_unsynced_ GUARDED_BY(mu_) = false;
};

}  // namespace cairn::write

#endif  // CAIRN_WRITE_JOURNAL_H_
