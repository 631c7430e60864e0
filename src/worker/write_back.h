// WriteBack: the closed files of write-back mounts waiting for their upload (docs/write-path.md,
// decision 6). A close hands over its sealed (fdatasync'ed) session; Add journals it (the
// record is durable before Add returns, so the client may be told the file is safe) and a few
// threads commit the files to their sources in the background, retrying failures with backoff
// until they succeed. After a crash, Open replays the journal: what was pending is pending
// again (its spool file adopted by the commit function), nothing acknowledged is lost.
//
// Order: files of one path are committed one at a time, in the order they were closed (a later
// close of a path never lands before an earlier one); each starts commit_delay after its close
// (or at once when someone Syncs it). A commit function decides what a file
// becomes (CommitResult): committed, removed (the path was removed meanwhile), a conflict (the
// source changed under it: the spool file is set aside for an operator, never dropped), or
// retry later.
//
// Room: max_pending_files bounds how many closed files wait, max_pending_bytes the closed
// files waiting plus the files of write-back mounts still open for writing (their spool files
// grow before they close: Reserve). A write that
// would pass it is refused at once with ResourceExhausted (the client waits and sends it again:
// no worker thread waits on uploads; docs/write-path.md, decision 6); a close past it waits up
// to full_wait for room, then fails ResourceExhausted (ENOSPC through FUSE): nothing is ever
// dropped silently. One file larger than the whole budget is taken when nothing else waits
// or is open.
//
// Thread-safety: thread-safe. Lock order: the caller's locks (a path's commit lock) before mu_;
// mu_ before the journal's. The commit function runs without mu_.
#ifndef CAIRN_WORKER_WRITE_BACK_H_
#define CAIRN_WORKER_WRITE_BACK_H_

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "metrics/registry.h"
#include "write/journal.h"
#include "write/write_session.h"

namespace cairn::worker {

// Where a worker's journal is, given its spool folders in the configured order: the first
// folder's `journal` (created there when none names anything); or, when only another folder's
// journal still names waiting files or uploads (the cache folders were given in another order
// since), that one. FailedPrecondition when several do: which is current cannot be told, and
// starting on either would sweep the spool files the other names. (Opens each journal found:
// a torn end is cut, as at a start.)
StatusOr<std::string> ChooseJournalPath(const std::vector<std::string>& spool_dirs);

struct WriteBackOptions {
  std::string journal_path;                  // Required; its folder must exist.
  uint64_t max_pending_bytes = 64ull << 30;  // Closed files waiting for upload, all together.
  // How many closed files may wait (each holds its spool file open until its upload: through
  // an outage, a job writing many small files would otherwise run the worker out of file
  // descriptors). A close past it waits for room as one past the bytes does.
  size_t max_pending_files = 100'000;
  std::chrono::milliseconds full_wait{60'000};  // How long a close waits for room.
  int threads = 4;                              // Files committed at once.
  // How long a closed file waits before its upload starts (a rename in that time moves it
  // instead of waiting for the upload); Sync starts the waiting files at once.
  std::chrono::milliseconds commit_delay{1000};
  std::chrono::milliseconds retry_min{500};     // Backoff after a failed commit, doubling...
  std::chrono::milliseconds retry_max{60'000};  // ...up to this.
  Clock* clock = nullptr;                       // Not owned; null: Clock::Real().
  metrics::Registry* registry = nullptr;        // Not owned; may be null.
};

// One closed file waiting for its upload.
struct PendingWrite {
  write::JournalRecord record;                   // kPending.
  std::unique_ptr<write::WriteSession> session;  // Sealed; null after a restart.
};

struct CommitResult {
  enum class Outcome { kCommitted, kRemoved, kConflict, kRetry };
  Outcome outcome = Outcome::kRetry;
  std::string detail;  // kCommitted: the version; kConflict: why; kRetry: the error.
  // kRetry: the failed attempt may have put the file in the source all the same (its error was
  // marked Status::outcome_unknown()); without it the source is as it was before the attempt.
  bool may_have_landed = false;
};

struct WriteBackStats {
  size_t files = 0;
  uint64_t bytes = 0;
  int64_t oldest_closed_at_ms = 0;  // 0 when nothing waits.
  size_t failing = 0;               // Files whose last attempt failed.
  std::string last_error;           // Of the oldest failing file.
};

class WriteBack {
 public:
  using CommitFn = std::function<CommitResult(PendingWrite& write)>;

  // Opens the journal and replays it (the pending files are not committed until Start).
  // Errors of WriteJournal::Open: a damaged journal stops the worker rather than lose writes.
  static StatusOr<std::unique_ptr<WriteBack>> Open(WriteBackOptions options);
  ~WriteBack();  // Stops the threads (a commit in progress finishes first).

  // The spool files the journal still needs (a worker's start must keep them).
  std::vector<std::string> SpoolFiles() const EXCLUDES(mu_);
  // The journal (thread-safe itself): its spool set, at a start.
  write::WriteJournal& journal() { return *journal_; }
  // Before Start: the waiting files whose spool file is no longer at the path the journal
  // holds (a cache folder mounted elsewhere since the last run) are looked for by name in
  // `spool_dirs`; one found in exactly one of them is read from there. (The journal keeps the
  // old path: each start looks again. Names are random, so a wrong match is unlikely; the
  // upload checks the bytes against the journaled digest where the record has one.) One found
  // in none or several stays at its recorded path: its upload reports it missing. Returns how
  // many were found.
  size_t RelocateSpoolFiles(const std::vector<std::string>& spool_dirs) EXCLUDES(mu_);
  // Starts the commit threads. Call once.
  void Start(CommitFn commit) EXCLUDES(mu_);
  // Stops the commit threads (a commit in progress finishes first). After it returns, the
  // commit function is never called again. Idempotent; the destructor calls it. Call it before
  // destroying what the commit function uses.
  void Stop() EXCLUDES(mu_);

  // ---- Room for files still open (see "Room" above) ----
  // Reserves `more` bytes for an open file that holds `held` bytes of reservations already (its
  // size so far). OK when everything pending and reserved plus `more` fits the budget, or when
  // this file is all there is (nothing pending, no other reservation); else ResourceExhausted
  // at once, naming what waits.
  Status Reserve(uint64_t held, uint64_t more) EXCLUDES(mu_);
  // Gives back `bytes` of reservations (a file truncated, aborted, or gone).
  void Unreserve(uint64_t bytes) EXCLUDES(mu_);
  uint64_t reserved_bytes() const EXCLUDES(mu_);

  // Takes a closed file (moves from `write` only on success) whose writes reserved `reserved`
  // bytes: with room (see above) for what the reservation does not cover, journals it and
  // queues it. On success the reservation becomes the file's pending bytes (the caller holds
  // none any more). Returns its id. ResourceExhausted at once without room (the caller waits
  // in WaitForRoom, holding no lock an upload needs, and tries again); IoError when the journal
  // cannot be written (then nothing was promised: the caller reports the error to its client,
  // and keeps its reservation).
  StatusOr<uint64_t> Add(PendingWrite& write, uint64_t reserved = 0) EXCLUDES(mu_);
  // OK if a closed file of `size` bytes, `reserved` of them reserved, has room now; else the
  // ResourceExhausted an Add would end with (a caller that holds a lock an upload may need, an
  // open file's, waits with WaitForRoom without it, then Adds).
  Status RoomFor(uint64_t size, uint64_t reserved) const EXCLUDES(mu_);
  // Waits until a closed file of `size` bytes, `reserved` of them reserved, has room, or until
  // `deadline` (false, counted as a refusal).
  bool WaitForRoom(uint64_t size, uint64_t reserved, std::chrono::steady_clock::time_point deadline)
      EXCLUDES(mu_);
  std::chrono::milliseconds full_wait() const { return options_.full_wait; }

  // The path was removed: its pending files (those with ids up to `through_id`: the ones a
  // hand-over passed on, not a close after them) must not be committed after the removal.
  // Files not being committed now end as removed at once; one being committed ends so when its
  // commit function asks Cancelled. Call with the path's commit lock held. IoError when the
  // journal did not take the removal (the files are cancelled here all the same, but a restart
  // would replay them: the caller says so to its client).
  [[nodiscard]] Status CancelPath(const std::string& path, uint64_t through_id = UINT64_MAX)
      EXCLUDES(mu_);
  bool Cancelled(uint64_t id) const EXCLUDES(mu_);
  // ---- Uploads a crash would leave in a source (S3 multipart uploads, folders' temp files) --
  // Journals that a writer of `path` began the upload `token` (ufs::ObjectWriter::UploadToken)
  // in its source. Best effort: when the journal cannot be written the upload is not tracked
  // (logged; the bucket's lifecycle rule is then the only cleanup after a crash).
  void UploadBegun(const std::string& path, const std::string& token) EXCLUDES(mu_);
  // Journals that the upload `token` was committed or aborted.
  void UploadEnded(const std::string& token) EXCLUDES(mu_);
  // The uploads the journal had begun and not ended when it was opened: their writers died
  // with the last process. The caller aborts each in its source, then calls LeftoverEnded.
  std::vector<write::JournalRecord> LeftoverUploads() const EXCLUDES(mu_);
  void LeftoverEnded(uint64_t id) EXCLUDES(mu_);

  // After `version` of `path` was committed: later files of the path replace it.
  void AdoptCommit(const std::string& path, const std::string& version) EXCLUDES(mu_);
  // The files of `path` waiting (and not being uploaded) expect `condition` of the source now
  // (AdoptCommit; None while a rename deletes the name's older object, Absent once it is gone).
  // Journaled: IoError when the journal did not take a record (the files expect `condition`
  // in this process all the same; after a crash, the one recorded before).
  Status SetCondition(const std::string& path, const ufs::WriteCondition& condition) EXCLUDES(mu_);
  // Journals that the files of `path` waiting (and not being uploaded) expect `condition`,
  // without changing what they expect in this process: what a replay after a crash from now on
  // finds (a rename deleting the name's older object: None). Errors as SetCondition.
  Status JournalCondition(const std::string& path, const ufs::WriteCondition& condition)
      EXCLUDES(mu_);
  // Journals again what each file of `path` waiting (and not being uploaded) expects in this
  // process (after JournalCondition, once that no longer holds). Errors as SetCondition.
  Status RejournalConditions(const std::string& path) EXCLUDES(mu_);
  // The condition of the oldest file of `path` waiting here: what the source held when the
  // chain of its closes began, which a file that goes on from them (an open of the path, a
  // sync's next session) expects too (commits update it: AdoptCommit). nullopt: none waits.
  std::optional<ufs::WriteCondition> OldestCondition(const std::string& path) const EXCLUDES(mu_);

  // Waits until no file under `prefix` (a namespace path; "/" for all) waits. DeadlineExceeded
  // (naming how many still wait, and the last error) at `timeout`.
  Status Sync(const std::string& prefix, std::chrono::milliseconds timeout) EXCLUDES(mu_);
  // Whether files of `path` wait here (not one removed or renamed away whose upload thread
  // has yet to notice: CancelPath).
  bool HasPending(const std::string& path) const EXCLUDES(mu_);
  // Whether closed file `id` still waits under `path` (not removed, renamed or uploaded since).
  bool IsPending(const std::string& path, uint64_t id) const EXCLUDES(mu_);
  // True when `path` has pending files, each a new file (its commit expects the name absent in
  // the source: WriteCondition::Absent) not being uploaded and none of whose upload attempts
  // may have landed (each failed before its commit went out, or was refused: a lake that
  // cannot be reached): nothing of them can be in the source. A rename or remove of such a path
  // need not delete the name there (and need not reach the source at all: it works while the
  // lake is down). A file replayed from the journal may be there (the run before may have
  // uploaded it).
  bool NeverUploaded(const std::string& path) const EXCLUDES(mu_);
  // What the source holds under `path` as far as this worker knows without asking it: the
  // condition of the oldest file of `path` waiting here (what it was opened over), when none of
  // them is being uploaded or may have landed (NeverUploaded's sense); nullopt otherwise (none
  // waits, or one may have landed). A rename that replaces them replaces that (MovePending).
  std::optional<ufs::WriteCondition> KnownSourceState(const std::string& path) const EXCLUDES(mu_);
  // The newest pending content of `path`: its size and a read-only descriptor of its spool
  // file (the caller closes it), for an open that continues from it.
  struct Latest {
    uint64_t id = 0;
    uint64_t size = 0;
    int fd = -1;
    // The spool file's digest as journaled (JournalRecord::digest); digest_part_size 0: none.
    uint64_t digest_part_size = 0;
    uint64_t digest = 0;
  };
  std::optional<Latest> LatestFor(const std::string& path) const EXCLUDES(mu_);
  WriteBackStats stats() const EXCLUDES(mu_);

  // ---- Readers of pending files (docs/write-path.md, decision 7) ----
  // A closed file as readers see it before its upload: its pending version names `epoch()` and
  // `id` (protocol::PendingVersion).
  struct PendingFile {
    std::string path;
    uint64_t id = 0;
    uint64_t size = 0;
    int64_t closed_at_ms = 0;
  };
  // Random per instance: a version from before a restart names another epoch.
  uint64_t epoch() const { return epoch_; }
  // The newest pending file of `path` (not removed since); nullopt if none.
  std::optional<PendingFile> PendingOf(const std::string& path) const EXCLUDES(mu_);
  // The newest pending file of each path under `dir` (a namespace path), by path.
  std::vector<PendingFile> PendingUnder(const std::string& dir) const EXCLUDES(mu_);
  // Pending file `id` of `path`, opened for reading: `fd` (the caller closes it; the bytes stay
  // readable after the upload removes the spool file) and its size. Once it is no longer
  // pending: `fd` -1 and, if its upload committed it lately (the last kRecentCommits commits),
  // the version it got in the source (a reader moves on to that); else NotFound (removed, set
  // aside as a conflict, or committed long ago).
  struct Opened {
    int fd = -1;
    uint64_t size = 0;
    std::string committed_version;
  };
  static constexpr size_t kRecentCommits = 4096;
  StatusOr<Opened> OpenPending(const std::string& path, uint64_t id) const EXCLUDES(mu_);

  // A rename of a file not yet uploaded (docs/write-path.md, decision 8), in two steps under
  // both paths' commit locks. Hold: kNothing when `from` has no pending file (and the caller's
  // hold, if any, is let go); else the caller holds both names (the queue starts no file of
  // either, including files closed later, until every hold of the name is let go) and kHeld,
  // or kBusy when a file of either is being uploaded right now (release the commit locks,
  // WaitIdle, Hold again: the hold stays meanwhile). `*holding` says whether the caller holds
  // them (false before its first Hold): calls again take no second hold. Holds are counted
  // per name, so one rename letting go never frees a name another still holds (a rename onto
  // `from` that gave up while `from` was being passed to another worker let the queue upload
  // it there, and both names ended in the source).
  enum class HoldResult { kNothing, kBusy, kHeld };
  HoldResult Hold(const std::string& from, const std::string& to, bool* holding) EXCLUDES(mu_);
  // Waits until no file of either name is being uploaded; false at `deadline`.
  bool WaitIdle(const std::string& from, const std::string& to,
                std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);
  // Lets go of the caller's hold (a rename that gave up); nothing when `*holding` is false.
  void Unhold(const std::string& from, const std::string& to, bool* holding) EXCLUDES(mu_);
  // After kHeld: the newest pending file of `from` is uploaded to `to` under `condition`
  // instead (journaled before this returns); the older files of `from` and the pending files
  // of `to` are dropped (the rename replaces them). Returns the moved file. IoError when the
  // journal cannot be written (nothing changed). Either way the caller's hold is let go. The
  // sessions let go of go to `released`: destroy them after this returns (their uploads are
  // aborted; the moved file's spool file stays).
  StatusOr<PendingFile> Retarget(const std::string& from, const std::string& to,
                                 const ufs::WriteCondition& condition, bool* holding,
                                 std::vector<std::unique_ptr<write::WriteSession>>* released)
      EXCLUDES(mu_);

 private:
  struct Item {
    PendingWrite write;
    bool running = false;
    bool cancelled = false;
    // It may be in the source under its current path: an upload of it is running, or one
    // ended whose outcome is unknown, or it was replayed (the run before may have uploaded it).
    bool begun = false;
    // The part of `begun` a finished attempt leaves: replayed, or an attempt that may have landed.
    bool may_have_landed = false;
    // Its upload committed (AdoptCommit told the others) and it is about to go: it no longer
    // says what the source holds.
    bool landed = false;
    int attempts = 0;
    int64_t next_try_us = 0;
    std::string last_error;
  };
  struct Metrics;

  WriteBack(WriteBackOptions options, std::unique_ptr<write::WriteJournal> journal,
            std::vector<write::JournalRecord> replayed);
  Clock& clock() const { return options_.clock != nullptr ? *options_.clock : *Clock::Real(); }
  void Loop() EXCLUDES(mu_);
  // The next file a thread may commit now; null if none (`wake_us`: when one may be ready).
  Item* NextReady(int64_t now_us, int64_t* wake_us) REQUIRES(mu_);
  // Journals the end of `id` and forgets it; returns its session for the caller to destroy
  // after releasing mu_. A journal that did not take the end is logged, told in `journaled` if
  // given, and journaled again by the loop (RetryUnjournaledLocked) until the journal takes it
  // (else the record stays live for good: copied by every compaction, replayed at every
  // start). A restart before that replays the file without its spool file: reported lost.
  std::unique_ptr<write::WriteSession> Finish(uint64_t id, write::JournalRecord::Outcome outcome,
                                              const std::string& detail,
                                              Status* journaled = nullptr) REQUIRES(mu_);
  void UpdateGauges() REQUIRES(mu_);
  // Journals the ends Finish could not, if their retry is due (else lowers `wake_us` to it).
  void RetryUnjournaledLocked(int64_t now_us, int64_t* wake_us) REQUIRES(mu_);
  // Calls fn(id, item) for each file of `path` waiting (not being uploaded, not cancelled);
  // returns the first error it returned.
  template <typename Fn>
  Status ForEachWaitingLocked(const std::string& path, Fn&& fn) REQUIRES(mu_);
  // Journals that waiting file `id` of `path` expects `condition` (a type 3 record).
  Status AppendConditionLocked(uint64_t id, const std::string& path,
                               const ufs::WriteCondition& condition) REQUIRES(mu_);
  // Takes (`by` +1) or lets go of (-1) one hold of each of the names `from` and `to`.
  void ChangeHoldsLocked(const std::string& from, const std::string& to, int by) REQUIRES(mu_);

  // Whether a closed file of `size` bytes, `reserved` of them reserved, fits now.
  bool HasRoomLocked(uint64_t size, uint64_t reserved) const REQUIRES(mu_);
  // The refusal of a file that has no room.
  Status NoRoomLocked() const REQUIRES(mu_);

  const WriteBackOptions options_;
  std::unique_ptr<Metrics> metrics_;
  const std::unique_ptr<write::WriteJournal> journal_;

  mutable Mutex mu_;
  CondVar changed_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t reserved_ GUARDED_BY(mu_) = 0;    // Held by open files (Reserve).
  size_t failing_ GUARDED_BY(mu_) = 0;       // Items whose last_error is set.
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // Bumped by every change (wakes idle threads).
  bool stopping_ GUARDED_BY(mu_) = false;
  const uint64_t epoch_;
  // The last kRecentCommits commits: id -> (path, version), and their order (oldest first).
  std::map<uint64_t, std::pair<std::string, std::string>> recent_commits_ GUARDED_BY(mu_);
  std::deque<uint64_t> recent_order_ GUARDED_BY(mu_);
  CommitFn commit_;  // Set once by Start, before the threads.
  std::vector<std::thread> threads_;
  std::map<std::string, uint64_t> uploads_ GUARDED_BY(mu_);  // Begun, by token: their ids.
  std::vector<write::JournalRecord> leftover_uploads_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;  // Destroying: upload reports are ignored.
  // Ends the journal did not take (Finish), oldest first; and when they are next tried.
  std::vector<write::JournalRecord> unjournaled_ GUARDED_BY(mu_);
  int64_t unjournaled_retry_us_ GUARDED_BY(mu_) = 0;
  // Last: destroyed first (the sessions' destructors may still report to the members above).
  // Names held by renames (Hold), each with its number of holders: no file of a name here
  // starts its upload.
  std::map<std::string, int, std::less<>> holds_ GUARDED_BY(mu_);
  std::map<uint64_t, Item> items_ GUARDED_BY(mu_);  // By id: the order of closing.
};

// Whether `path` is `prefix` or under it ("/" holds everything; "/data" does not hold "/data2").
bool PathUnder(const std::string& path, const std::string& prefix);

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_WRITE_BACK_H_
