// WriteService: the files being written through this worker (protocol v5 write requests,
// docs/write-path.md). Each open file is a write::WriteSession (a spool file in one of the
// worker's spool folders, parts uploaded while the file is written) behind a handle: a random
// 64-bit number, usable only by the principal that opened it (on any connection: a client
// spreads its requests over several), gone after CloseWrite, AbortWrite, or `idle_timeout`
// without a request (then aborted: nothing becomes visible). KeepWrite is such a request: a
// client sends it for a file it holds open without writing (OpenWrite's reply names the
// timeout), so only a handle its client forgot or died with is aborted.
//
// Semantics (write-through; docs/consistency.md, "Writes through Cairn"):
//   * OpenWrite resolves the path against the worker's mount table; the mount must be writable
//     (MountSpec::read_only false: FailedPrecondition otherwise). Without truncate, the spool
//     starts as a copy of the current object (read from the source), so a partial rewrite keeps
//     the rest. The commit is conditional: on the version seen at open, or on the key being
//     absent if it was (AlreadyExists / FailedPrecondition when someone else changed it since,
//     where the source can tell: ufs.h).
//   * SyncWrite and CloseWrite commit: when they return OK the object is in the source. A write
//     after a sync continues in a new session seeded from the synced content (conditional on
//     the synced version); a close after a sync with nothing written since commits nothing more.
//   * Two writers of one path through this worker: the last to close wins. Commits of one path
//     are serialised, and a commit updates the condition of the path's other open files to the
//     version it made, so they replace it rather than fail (an exclusive create still fails:
//     the file exists now). A change made elsewhere (another
//     worker's writer after a failover, a job writing to the bucket directly) still fails them.
//   * A failed SyncWrite or CloseWrite keeps the handle (the client may retry, or abort).
//   * A closed file's pages enter the cache in the background (options.written_pages), under the
//     version its last commit made.
//
// Limits: at most max_open_files open files, max_open_files_per_principal per principal
// (ResourceExhausted past them); write data is checked against its checksums before it is
// spooled (Corruption: the client sends it again).
//
// Thread-safety: thread-safe. Serve may block on the source (OpenWrite without truncate,
// SyncWrite, CloseWrite, RemovePath): run those on a pool thread; WritePage and TruncateWrite
// touch the local spool file (the first after a commit copies the file, and after a
// write-back sync may stat the source), and ServeNow answers them without waiting for any of
// that.
// Lock order: a path's commit lock (commit_locks_, one per path; two paths only together, in
// one PathLocks::Lock(a, b), never one while another is held), then the committing file's mu,
// then the other open files' mu (AdoptCommit) one at a time; a file's park_mu before its mu
// (ServeNow), or alone; open_mu_ alone.
#ifndef CAIRN_WORKER_WRITE_SERVICE_H_
#define CAIRN_WORKER_WRITE_SERVICE_H_

#include <deque>
#include <atomic>
#include <chrono>
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
#include "common/thread_pool.h"
#include "metrics/registry.h"
#include "protocol/page_channel.h"
#include "protocol/wire.h"
#include "worker/page_service.h"
#include "worker/path_locks.h"
#include "worker/write_back.h"
#include "worker/written_pages.h"
#include "write/write_session.h"

namespace cairn::worker {

struct WriteServiceOptions {
  // Where spool files go (one per open file; each folder on the disk of a cache folder). The
  // folders are created if missing and emptied at start: a spool file left by a process that
  // died belongs to a write whose close never returned OK. Files are spread over them.
  std::vector<std::string> spool_dirs;
  uint64_t part_size = 8 << 20;  // Base of the part layout (S3: at least 5 MiB).
  // A file at most this long at its commit goes up in one PUT, and sends no part early
  // (write::WriteSessionOptions::whole_put_bytes): a 10 MiB shard of a checkpoint closes in
  // one request instead of a multipart upload's four.
  uint64_t whole_put_bytes = 16 << 20;
  int max_uploads_in_flight = 4;  // Part uploads per open file.
  int upload_threads = 16;        // Part uploads, all open files together.
  size_t max_open_files = 4096;
  size_t max_open_files_per_principal = 1024;
  // Clients keep the files they hold open alive (KeepWrite every third of this, protocol v13):
  // only a client that died or hung loses its files to it, and gives back their room then.
  std::chrono::milliseconds idle_timeout{3 * 60 * 1000};
  Clock* clock = nullptr;                 // Idle times. Not owned; null: Clock::Real().
  metrics::Registry* registry = nullptr;  // Write metrics. Not owned; may be null.
  // Takes each committed file into the cache (a restore is a hit). Not owned; must outlive the
  // service; null: written files enter the cache only when they are read.
  WrittenPages* written_pages = nullptr;
  // Write-back (empty journal_path: no write-back; opens on write-back mounts then fail with
  // FailedPrecondition). The journal lives next to the first spool folder by default.
  WriteBackOptions write_back;
  std::chrono::milliseconds rename_wait{10 * 60 * 1000};
  // The worker that owns a path in a cluster, for HandOver (a rename of a write-back file not
  // yet uploaded whose new name another worker owns): the channel to that worker, null when
  // this worker owns the path, an error when no owner is known. Unset (a single worker, or a
  // static worker list: the workers know no peers): a HandOver uploads the file instead.
  std::function<StatusOr<std::shared_ptr<protocol::PageChannel>>(const std::string& path)> owner_of;
  // The children of folder `dir` that hold files other workers of the cluster have closed and
  // not yet uploaded (PeerPending::ChildrenUnder: a worker that does not answer in time is left
  // out). An rmdir on a write-back mount asks it: a write-back file waits at the owner of its
  // own path, not at the folder's. Unset: no other workers.
  std::function<std::vector<protocol::DirEntry>(const std::string& dir)> pending_at_peers;
};

class WriteService final : public PendingFiles {
 public:
  // `pages` (not owned, must outlive the service) resolves paths to mounts. Starts the thread
  // that aborts idle files. InvalidArgument without a spool folder, IoError if one cannot be
  // made.
  static StatusOr<std::unique_ptr<WriteService>> Create(PageService* pages,
                                                        WriteServiceOptions options);
  ~WriteService() override;  // Aborts every open file.

  // Re-checks the caller's write grant on a path at commit (the policy may have changed since
  // the open); OK when there is no policy.
  using RecheckFn = std::function<Status(const std::string& path)>;

  // Answers one write request from `principal` (the identity the caller's grants were checked
  // for). Errors: NotFound (no such file without create, an unknown or foreign handle),
  // AlreadyExists, FailedPrecondition (read-only mount, a conflicting change at commit),
  // InvalidArgument, Corruption (data that does not match its checksums), ResourceExhausted
  // (too many open files, disk full), Unavailable (no mount here for the path), and the
  // source's errors at commit.
  StatusOr<protocol::WriteReply> Serve(const std::string& principal,
                                       const protocol::WriteRequest& request,
                                       const RecheckFn& recheck = nullptr);
  // For the requests that touch only the file's spool (WritePage, TruncateWrite, ReadWritten,
  // KeepWrite), served on a thread that must not wait long (a connection's reader): answers
  // now, as Serve, unless that would wait for a long operation of the file (a commit
  // uploading it, a write-back seal, an abort) or be one (the first write or truncate after a
  // commit starts a new session from the committed file: write-back copies it), or come
  // after requests of the file it handed off and that are not served yet. Then it returns
  // nullopt and calls `resume` once, with no lock held: from here (the request is itself
  // long), or from the thread that ends what it waits for; the caller then answers the
  // request with Serve on a thread that may block (the client never has two overlapping requests of
  // one file in flight; requests handed off are all served before any later one of the file is, so
  // a write sent again after a timeout never lands after a newer one). `park` runs first, on this
  // thread, while `request` is valid (a WritePage's data points into the caller's buffer), and
  // returns `resume`: it keeps a copy of what the request needs, and `hold` until the request is
  // served or dropped (the file's later requests wait until then; release it with no lock held that
  // a resume takes: it may hand off those requests).
  using ResumeFn = std::function<void(std::shared_ptr<void> hold)>;
  using ParkFn = std::function<ResumeFn()>;
  std::optional<StatusOr<protocol::WriteReply>> ServeNow(const std::string& principal,
                                                         const protocol::WriteRequest& request,
                                                         const ParkFn& park);
  // The path of `principal`'s open file `handle` (the server checks the read grant on it before
  // a ReadWritten); NotFound as Serve.
  StatusOr<std::string> PathOf(const std::string& principal, uint64_t handle) EXCLUDES(open_mu_);

  // Aborts the files idle for longer than idle_timeout; returns how many (the reaper thread
  // calls it; tests call it with a fake clock).
  size_t AbortIdle() EXCLUDES(open_mu_);
  // Aborts, in their sources, the uploads the journal says the last process began and never
  // ended (it died: S3 multipart uploads, folders' temp files); returns how many are done
  // with. One whose source cannot be reached (or whose mount is not known yet) is tried again
  // by the next call: the reaper thread calls it at start and every round.
  size_t AbortLeftoverUploads();
  size_t open_files() const EXCLUDES(open_mu_);

  // Waits until the write-back files under `prefix` are in their sources (`cairn sync`). OK at
  // once without write-back; DeadlineExceeded after `timeout`.
  Status SyncPath(const std::string& prefix, std::chrono::milliseconds timeout);
  // Null without write-back.
  WriteBack* write_back() { return write_back_.get(); }

  // PendingFiles (registered with the page service while write-back is on): the write-back
  // files closed here and not yet uploaded, for readers.
  std::optional<Entry> PendingStat(const std::string& path) override;
  std::vector<Entry> PendingUnder(const std::string& dir) override;
  StatusOr<Page> ReadPendingPage(const protocol::PageRef& page, uint32_t page_length) override;

 private:
  struct OpenFile;
  struct Metrics;
  WriteService(PageService* pages, WriteServiceOptions options,
               std::unique_ptr<WriteBack> write_back);
  Clock& clock() const { return options_.clock != nullptr ? *options_.clock : *Clock::Real(); }
  Entry EntryOf(const WriteBack::PendingFile& file) const;
  // The options of a session writing `path` (its uploads noted in the journal, if any); a
  // write-back file's parts wait for its commit (WriteSessionOptions::upload_early).
  write::WriteSessionOptions SessionOptions(const std::string& path, bool write_back);

  // Serve's part for an open file's request (not AbortWrite).
  StatusOr<protocol::WriteReply> ServeFile(OpenFile& file, const protocol::WriteRequest& request,
                                           const RecheckFn& recheck);
  StatusOr<protocol::WriteReply> Open(const std::string& principal,
                                      const protocol::OpenWriteRequest& request);
  StatusOr<protocol::WriteReply> Write(OpenFile& file, const protocol::WritePageRequest& request);
  StatusOr<protocol::WriteReply> Truncate(OpenFile& file, uint64_t size);
  // The bytes written so far (ReadWritten): from the session, or the sealed spool file of a
  // write-back file closed through this handle.
  StatusOr<protocol::WriteReply> ReadWritten(OpenFile& file,
                                             const protocol::ReadWrittenRequest& request);
  StatusOr<protocol::WriteReply> Commit(OpenFile& file, const RecheckFn& recheck);
  // Commit of a write-back file: seal, journal, answer.
  StatusOr<protocol::WriteReply> CommitBack(OpenFile& file, const RecheckFn& recheck);
  // CommitBack's step, under the file's lock: seals and journals the closed file; nullopt when
  // the write-back budget has no room for it now (`*size` and `*reserved`: its size and
  // reservation, `*no_room`: the refusal). Nothing changed when the room was missing before
  // the seal (the usual case); when it went to other files during the seal, the session stays
  // sealed: writes of the file fail (FailedPrecondition) until the close or sync ends.
  StatusOr<std::optional<protocol::WriteReply>> AddClosed(OpenFile& file, const RecheckFn& recheck,
                                                          uint64_t* size, uint64_t* reserved,
                                                          Status* no_room);
  // The write-back queue's commit of one closed file (runs on its threads).
  CommitResult CommitPending(PendingWrite& write);
  // After a commit refused by its condition: whether the source now holds exactly the bytes of
  // `spool_path` (our own commit whose record was lost to a crash, or the same bytes written
  // twice); its info if so.
  std::optional<ufs::ObjectInfo> SourceHolds(ufs::UnderStorage& ufs, const std::string& key,
                                             const std::string& spool_path, uint64_t size);
  // Moves a conflicting spool file to `<its folder>/conflicts/`; returns where. IoError when
  // it cannot (the caller retries later: the file stays pending, nothing is dropped).
  StatusOr<std::string> SetAside(const PendingWrite& write);
  // Whether `path` (`key` in `ufs`) is a directory in its source, or holds files waiting here.
  bool IsDirectory(ufs::UnderStorage& ufs, const std::string& key, const std::string& path) const;
  // Whether files closed and not yet uploaded wait under folder `dir`: here, or (`ask_peers`)
  // at other workers (options_.pending_at_peers).
  bool PendingInFolder(const std::string& dir, bool ask_peers) const;
  // The condition of a write-back write that continues a file after a sync (its content is the
  // synced one); `adopted`: the version a commit of the path made since (AdoptCommit), if any.
  ufs::WriteCondition ConditionAfterSync(const OpenFile& file, const std::string& adopted);
  StatusOr<protocol::WriteReply> Remove(const protocol::RemovePathRequest& request);
  StatusOr<protocol::WriteReply> MakeDir(const protocol::MakeDirRequest& request);
  StatusOr<protocol::WriteReply> Rename(const protocol::RenameRequest& request);
  // HandOver (protocol v12): a rename of `from`'s pending file, sent here, the owner of `from`.
  // When another worker owns `to`, the file is written to it under `to` (PassOn) and dropped
  // here; when this worker owns both, it is a Rename. NotFound once nothing of `from` waits
  // here (none did, or it could not be passed on and was uploaded instead).
  StatusOr<protocol::WriteReply> HandOver(const protocol::HandOverRequest& request);
  // HandOver's step with the owner of `to` known: holds `from`'s files (waiting for an upload
  // in progress) and opens the newest, then PassHeld. nullopt when nothing of `from` waits any
  // more. `*source_failed` (set false first): the error is the source's (its delete of the old
  // name's object), which an upload instead would meet too.
  StatusOr<std::optional<protocol::WriteReply>> PassOn(const protocol::HandOverRequest& request,
                                                       const PageService::PathAt& from,
                                                       protocol::PageChannel& owner,
                                                       bool* source_failed);
  // With `from`'s files held (not its commit lock: the copy takes a while): writes `latest`
  // (closes its fd) to `owner` under `to`, deletes the old name's object in the source if one
  // of the files may be there, then lets the owner close the copy and drops the files of `from`
  // up to it here. Lets go of the hold (`*holding`: WriteBack::Hold's) either way.
  StatusOr<protocol::WriteReply> PassHeld(const protocol::HandOverRequest& request,
                                          const PageService::PathAt& from,
                                          protocol::PageChannel& owner,
                                          const WriteBack::Latest& latest, bool* holding,
                                          bool* source_failed);
  // A rename whose `from` has files pending here (write-back): the newest is uploaded to `to`
  // instead, without waiting for anything (decision 8). nullopt when it cannot be done so (a
  // file of either name is being uploaded right now): the caller renames in the source.
  StatusOr<std::optional<protocol::WriteReply>> RenamePending(
      const protocol::RenameRequest& request, const PageService::PathAt& from,
      const PageService::PathAt& to);
  // The condition of an upload that replaces, by a rename, what the source holds under `key`:
  // its version, its absence, or (the source cannot say) none.
  static ufs::WriteCondition ReplacedByRename(ufs::UnderStorage& ufs, const std::string& key);
  // Deletes the object `key` of `ufs` (`path`), an older upload of a waiting file being renamed
  // away. Journaled first: the files of `path` waiting here replace whatever is there (a crash
  // during the delete, which a lake in trouble can make minutes long, or right after it,
  // uploads them under `path` over the old object or onto its absence, as if the rename had
  // not been asked; before 12-07 they expected the old object and were set aside after the
  // delete). In this process they keep their condition until the delete ends: then the
  // name's absence; after a failed delete, a stat decides: still there, what they expected
  // (journaled again); gone, the absence (and OK); no answer, whatever is there. IoError when
  // the journal does not take the first step (nothing deleted); the source's error otherwise
  // (`*source_failed`). NotFound from the source is success.
  Status DeleteOldName(ufs::UnderStorage& ufs, const std::string& key, const std::string& path,
                       bool* source_failed);
  // RenamePending's step once the files of both names are held (`*holding`: WriteBack::Hold's)
  // under both commit locks. Lets go of the hold either way.
  StatusOr<WriteBack::PendingFile> MovePending(
      const protocol::RenameRequest& request, const PageService::PathAt& from,
      const PageService::PathAt& to, bool* holding,
      std::vector<std::unique_ptr<write::WriteSession>>* released);
  // Where `path` (normalised) lives, for a change of the namespace: InvalidArgument for a mount
  // root or a path above the mounts, FailedPrecondition for a read-only mount.
  StatusOr<PageService::PathAt> ChangeablePath(const std::string& path);

  // The open file `handle` of `principal`; NotFound otherwise (a foreign handle looks unknown).
  StatusOr<std::shared_ptr<OpenFile>> Find(const std::string& principal, uint64_t handle)
      EXCLUDES(open_mu_);
  std::shared_ptr<OpenFile> Take(uint64_t handle) EXCLUDES(open_mu_);
  // ResourceExhausted when the worker or `principal` has its maximum of open files
  // (Unavailable while stopping).
  Status CheckRoom(const std::string& principal) EXCLUDES(open_mu_);
  Status CheckRoomLocked(const std::string& principal) const REQUIRES(open_mu_);
  // The session a write after a commit continues in, holding the committed content. Write-
  // through: the committed session's own spool file, taken over (no copy; `committed_session`
  // gives it up once the new session has it). Write-back: a copy of the sealed spool file
  // `sealed_fd` (with `sealed_digest`, checked), which waits in the queue. The caller holds
  // file.mu and passes what it guards.
  StatusOr<std::unique_ptr<write::WriteSession>> Continue(
      const OpenFile& file, write::WriteSession* committed_session, int sealed_fd,
      const std::optional<write::SpoolDigest>& sealed_digest, const ufs::ObjectInfo& committed);
  // A new session holding a copy of the first `size` bytes of the open descriptor `fd` (not
  // closed here), a sealed spool file with `digest` when it has one: a copy that does not
  // match it is IoError (the sealed file was damaged on disk; its own upload refuses it too).
  StatusOr<std::unique_ptr<write::WriteSession>> SessionFromFd(
      const OpenFile& file, int fd, uint64_t size, ufs::WriteCondition condition,
      const std::optional<write::SpoolDigest>& digest);
  // Hands a closed `file` (its spool, as committed) to options_.written_pages.
  void CacheClosed(OpenFile& file);
  void CacheWritten(std::shared_ptr<const mount::MountTable> table, const mount::Mount* mount,
                    const std::string& key, const ufs::ObjectInfo& info,
                    const std::string& spool_path);
  // After `committer` (null: the write-back queue) committed `version` of `path`, the other open
  // files of the path expect it.
  void AdoptCommit(const OpenFile* committer, const std::string& path, const std::string& version)
      EXCLUDES(open_mu_);
  void ReapLoop() EXCLUDES(open_mu_);

  PageService* const pages_;
  const WriteServiceOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ThreadPool> uploads_;
  std::unique_ptr<ThreadPool>
      hashes_;  // Write-back spool digests (WriteSessionOptions::hash_pool).
  std::unique_ptr<ThreadPool> cleanup_;    // Destroys sessions a rename let go of (write-back).
  std::unique_ptr<WriteBack> write_back_;  // Null without write-back.
  std::atomic<uint64_t> next_spool_{0};
  // Commits, removes and renames of one path run one at a time; other paths' never wait for
  // them (until 12-07 64 stripes by path hash: the queue's upload of one file, minutes long,
  // held up a rename or a write-through close of any path in its stripe).
  PathLocks commit_locks_;

  mutable Mutex open_mu_;
  std::map<uint64_t, std::shared_ptr<OpenFile>> open_ GUARDED_BY(open_mu_);
  std::map<std::string, size_t> open_by_principal_ GUARDED_BY(open_mu_);
  bool stopping_ GUARDED_BY(open_mu_) = false;
  // Commits counted, and the last of each recent path (at most kRecentCommitPaths): an open
  // catches up with the commits of its path made while it read the current content, before
  // AdoptCommit could find it in open_.
  static constexpr size_t kRecentCommitPaths = 4096;
  uint64_t commits_ GUARDED_BY(open_mu_) = 0;
  std::map<std::string, std::pair<uint64_t, std::string>> last_commit_ GUARDED_BY(open_mu_);
  std::deque<std::pair<std::string, uint64_t>> last_commit_order_ GUARDED_BY(open_mu_);
  CondVar stop_cv_;
  std::thread reaper_;
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_WRITE_SERVICE_H_
