#include "worker/write_service.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <system_error>

#include "common/file_util.h"
#include "common/checksum.h"
#include "common/crash_point.h"
#include "write/spool_folders.h"

namespace cairn::worker {

using protocol::WriteReply;

// One file open for writing.
struct WriteService::OpenFile : std::enable_shared_from_this<WriteService::OpenFile> {
  uint64_t handle = 0;
  std::string principal;
  std::string path;
  std::shared_ptr<const mount::MountTable> table;  // Keeps `ufs` and the mount alive.
  const mount::Mount* mount = nullptr;
  std::shared_ptr<ufs::UnderStorage> ufs;
  std::string key;
  std::string spool_dir;
  bool exclusive = false;   // An exclusive create stays one: another writer's commit fails it.
  bool write_back = false;  // The mount's mode when the file was opened.
  std::atomic<int64_t> last_used_us{0};
  std::atomic<int> busy{0};  // Requests being served now (the reaper leaves the file alone).

  // ServeNow's requests that would wait for a long operation of the file (LongOp), or that
  // came after requests handed off the reader and not yet served (each holds a ResumeHold
  // until then): they wait in `parked` and are handed off, all together, once neither is left,
  // so a request is never applied after one the client sent later (a write it sent again after
  // a timeout, then a newer write of the same bytes).
  Mutex park_mu;
  int long_ops GUARDED_BY(park_mu) = 0;
  int handed_off GUARDED_BY(park_mu) = 0;  // ResumeHolds alive.
  std::vector<ResumeFn> parked GUARDED_BY(park_mu);

  bool MustParkLocked() const REQUIRES(park_mu) { return long_ops > 0 || handed_off > 0; }
  // After a count went down: the parked requests to hand off now (counted in handed_off).
  std::vector<ResumeFn> TakeParkedLocked() REQUIRES(park_mu) {
    std::vector<ResumeFn> taken;
    if (MustParkLocked()) return taken;
    taken.swap(parked);
    handed_off += static_cast<int>(taken.size());
    return taken;
  }
  // Hands off `taken` (no lock held), each with a ResumeHold.
  void HandOff(std::vector<ResumeFn> taken) EXCLUDES(park_mu);

  Mutex mu;
  std::unique_ptr<write::WriteSession> session GUARDED_BY(mu);
  // Set by a commit; cleared by the next write (which starts a new session seeded from it).
  // Write-back: the version is empty (the file is journaled, not yet in the source).
  std::optional<ufs::ObjectInfo> committed GUARDED_BY(mu);
  // Write-back: a descriptor of the spool file handed to the queue at the last sync, from which
  // a later write continues (the queue removes the file once it is uploaded), and its digest.
  int sealed_fd GUARDED_BY(mu) = -1;
  std::optional<write::SpoolDigest> sealed_digest GUARDED_BY(mu);
  // Write-back: room this file holds in the budget (WriteBack::Reserve), at least its size
  // while it has a session; handed to the queue with the file at a close or sync.
  WriteBack* room = nullptr;  // Null for write-through files.
  uint64_t reserved GUARDED_BY(mu) = 0;

  // Write-back: makes the room held at least `size` (a write or truncate to that size).
  Status ReserveRoom(uint64_t size) REQUIRES(mu) {
    if (room == nullptr || size <= reserved) return Status::Ok();
    CAIRN_RETURN_IF_ERROR(
        room->Reserve(reserved, size - reserved).WithContext("no room for " + path));
    reserved = size;
    return Status::Ok();
  }
  // Write-back: gives back what the room held is above `size` (a truncate to that size).
  void ShrinkRoom(uint64_t size) REQUIRES(mu) {
    if (room == nullptr || size >= reserved) return;
    room->Unreserve(reserved - size);
    reserved = size;
  }

  ~OpenFile() {
    MutexLock l(&mu);
    if (sealed_fd >= 0) ::close(sealed_fd);
    if (room != nullptr) room->Unreserve(reserved);
  }
};

namespace {

// Marks a long operation of an open file (one that holds its mu while it talks to the source
// or syncs a disk) for its lifetime: ServeNow leaves the file's requests for its end instead
// of waiting on a connection's reader, and the end hands them off.
template <typename File>
class LongOp {
 public:
  explicit LongOp(File& file) EXCLUDES(file.park_mu) : file_(file) {
    MutexLock l(&file_.park_mu);
    ++file_.long_ops;
  }
  ~LongOp() {
    std::vector<WriteService::ResumeFn> taken;
    {
      MutexLock l(&file_.park_mu);
      --file_.long_ops;
      taken = file_.TakeParkedLocked();
    }
    file_.HandOff(std::move(taken));
  }
  LongOp(const LongOp&) = delete;
  LongOp& operator=(const LongOp&) = delete;

 private:
  File& file_;
};

// Kept by a request handed off the reader until it is served, or dropped: the file's later
// requests wait for it. Counted in handed_off by whoever hands it off.
template <typename File>
class ResumeHold {
 public:
  explicit ResumeHold(std::shared_ptr<File> file) : file_(std::move(file)) {}
  ~ResumeHold() {
    std::vector<WriteService::ResumeFn> taken;
    {
      MutexLock l(&file_->park_mu);
      --file_->handed_off;
      taken = file_->TakeParkedLocked();
    }
    file_->HandOff(std::move(taken));
  }
  ResumeHold(const ResumeHold&) = delete;
  ResumeHold& operator=(const ResumeHold&) = delete;

 private:
  const std::shared_ptr<File> file_;
};

}  // namespace

void WriteService::OpenFile::HandOff(std::vector<ResumeFn> taken) {
  for (ResumeFn& resume : taken) resume(std::make_shared<ResumeHold<OpenFile>>(shared_from_this()));
}

struct WriteService::Metrics {
  explicit Metrics(metrics::Registry* r)
      : open(r->AddGauge("cairn_worker_write_files_open", "Files open for writing now")),
        bytes(r->AddCounter("cairn_worker_write_bytes_total",
                            "Bytes written by clients into files open for writing")),
        commits(r->AddCounter("cairn_worker_write_commits_total",
                              "Files committed to their source (close or sync)")),
        commit_failures(r->AddCounter("cairn_worker_write_commit_failures_total",
                                      "Commits that failed (the client was told)")),
        aborts(r->AddCounter("cairn_worker_write_aborts_total",
                             "Files discarded: aborted by the client or idle too long")),
        removes(r->AddCounter("cairn_worker_write_removes_total", "Files removed")),
        renames(r->AddCounter("cairn_worker_write_renames_total", "Files (or folders) renamed")),
        hand_overs(r->AddCounter("cairn_worker_write_back_hand_overs_total",
                                 "Renamed write-back files not yet uploaded that this worker "
                                 "passed to the owner of their new name")),
        directories(r->AddCounter("cairn_worker_write_directory_changes_total",
                                  "Directories created or removed")),
        checksum_failures(r->AddCounter("cairn_worker_write_checksum_failures_total",
                                        "Write requests whose data did not match its "
                                        "checksums (refused)")),
        opens_seen_absent(r->AddCounter("cairn_worker_write_opens_seen_absent_total",
                                        "Creates that took the client's lookup for the "
                                        "source's state (no stat of the source)")),
        damaged_spools(r->AddCounter("cairn_worker_write_back_damaged_spools_total",
                                     "Write-back files not uploaded because their spool file "
                                     "no longer matched its digest (set aside)")) {}
  std::unique_ptr<metrics::Registry> owned;
  metrics::Gauge* open;
  metrics::Counter* bytes;
  metrics::Counter* commits;
  metrics::Counter* commit_failures;
  metrics::Counter* aborts;
  metrics::Counter* removes;
  metrics::Counter* renames;
  metrics::Counter* hand_overs;
  metrics::Counter* directories;
  metrics::Counter* checksum_failures;
  metrics::Counter* opens_seen_absent;
  metrics::Counter* damaged_spools;
};

namespace {

constexpr size_t kCopyChunk = 4 << 20;
// Write-back spool files start their disk write every this many bytes (WriteSessionOptions).
constexpr uint64_t kWriteBehindBytes = 8 << 20;
// Threads hashing write-back parts for their spool digests while the files are written: CPU
// work (XXH3 of bytes in the page cache), apart from the uploads that wait on the network.
constexpr int kHashThreads = 2;

uint64_t RandomHandle() {
  static thread_local std::random_device rd;
  uint64_t h = 0;
  while (h == 0) h = (uint64_t{rd()} << 32) ^ rd();
  return h;
}

// Reads exactly out.size() bytes at `offset` of the spool file `fd` of `path` (a closed file:
// its size is known); IoError if it cannot, or is short.
Status ReadSealedSpool(int fd, uint64_t offset, std::span<char> out, const std::string& path) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return IoError("cannot read the spool file of " + path +
                     (n < 0 ? std::string(": ") + std::strerror(errno) : ": it is short"));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Creates `dir` and removes what a previous process left in it, but for the files of `keep`
// (named by the write-back journal).
// A file by identity (st_dev, st_ino). The spool folders may be spelled otherwise than when
// their files were journaled ("/c" and "/c/", a path through a symlink): a file the journal
// still names is recognised by what it is, never swept as an unfinished write's.
using FileId = std::pair<uint64_t, uint64_t>;

std::optional<FileId> IdOf(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

Status PrepareSpoolDir(const std::string& dir, const std::set<FileId>& keep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create spool folder " + dir + ": " + ec.message());
  // Spool files hold other principals' data: the folder is the worker's alone.
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  if (ec) return IoError("cannot restrict spool folder " + dir + ": " + ec.message());
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("write-", 0) != 0) continue;
    const std::optional<FileId> id = IdOf(entry.path().string());
    if (!id || keep.count(*id) == 0) {
      std::filesystem::remove(entry.path(), ec);
      if (!ec)
        spdlog::info("removed the spool file {} of an unfinished write", entry.path().string());
    }
  }
  if (ec) return IoError("cannot clean spool folder " + dir + ": " + ec.message());
  return Status::Ok();
}

// Checks the spool folders against the journal before any is used or swept, then stamps them
// with its spool set (write/spool_folders.h): recorded in the journal first, so that a crash in
// between leaves folders unstamped, which the next check accepts while their files are there.
Status ClaimSpoolFolders(WriteBack& write_back, const std::vector<std::string>& dirs,
                         const std::vector<std::string>& named) {
  const uint64_t recorded = write_back.journal().spool_set();
  const uint64_t set = recorded != 0 ? recorded : write::NewSpoolSet();
  CAIRN_RETURN_IF_ERROR(write::CheckSpoolFolders(dirs, set, named));
  if (recorded == 0) CAIRN_RETURN_IF_ERROR(write_back.journal().RecordSpoolSet(set));
  return write::StampSpoolFolders(dirs, set);
}

// Renames `from` to `to` unless `to` exists: 0, or the errno (EEXIST when it does).
int RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != EPERM) return errno;
  // A file system (or a kernel, or a seccomp filter) without RENAME_NOREPLACE: link(2) refuses
  // an existing name too.
  if (::link(from.c_str(), to.c_str()) != 0) return errno;
  ::unlink(from.c_str());
  return 0;
}

Status CheckNormalised(const std::string& path) {
  StatusOr<std::string> normal = mount::NormalizePath(path);
  if (!normal.ok() || *normal != path) {
    return InvalidArgumentError("'" + path + "' is not a normalised namespace path");
  }
  return Status::Ok();
}

WriteReply Reply(uint64_t handle, uint64_t size) {
  WriteReply r;
  r.handle = handle;
  r.size = size;
  return r;
}

}  // namespace

StatusOr<std::unique_ptr<WriteService>> WriteService::Create(PageService* pages,
                                                             WriteServiceOptions options) {
  if (options.spool_dirs.empty()) return InvalidArgumentError("no spool folder for writes");
  if (options.max_uploads_in_flight < 1 || options.upload_threads < 1) {
    return InvalidArgumentError("write uploads need at least one thread");
  }
  std::unique_ptr<WriteBack> write_back;
  std::set<FileId> keep;
  if (!options.write_back.journal_path.empty()) {
    std::error_code ec;
    const auto folder = std::filesystem::path(options.write_back.journal_path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    if (ec) return IoError("cannot create the folder of " + options.write_back.journal_path);
    if (options.write_back.clock == nullptr) options.write_back.clock = options.clock;
    if (options.write_back.registry == nullptr) options.write_back.registry = options.registry;
    CAIRN_ASSIGN_OR_RETURN(write_back, WriteBack::Open(options.write_back));
    write_back->RelocateSpoolFiles(options.spool_dirs);
    const std::vector<std::string> named = write_back->SpoolFiles();
    CAIRN_RETURN_IF_ERROR(ClaimSpoolFolders(*write_back, options.spool_dirs, named));
    for (const std::string& file : named) {
      if (std::optional<FileId> id = IdOf(file)) keep.insert(*id);
    }
  }
  for (const std::string& dir : options.spool_dirs) {
    CAIRN_RETURN_IF_ERROR(PrepareSpoolDir(dir, keep));
  }
  std::unique_ptr<WriteService> service(
      new WriteService(pages, std::move(options), std::move(write_back)));
  if (service->write_back_ != nullptr) {
    WriteService* self = service.get();
    service->write_back_->Start([self](PendingWrite& write) { return self->CommitPending(write); });
    pages->SetPendingFiles(self);  // Readers see the closed files before their upload.
  }
  return service;
}

WriteService::WriteService(PageService* pages, WriteServiceOptions options,
                           std::unique_ptr<WriteBack> write_back)
    : pages_(pages), options_(std::move(options)), write_back_(std::move(write_back)) {
  metrics::Registry* registry = options_.registry;
  std::unique_ptr<metrics::Registry> owned;
  if (registry == nullptr) {
    owned = std::make_unique<metrics::Registry>();
    registry = owned.get();
  }
  metrics_ = std::make_unique<Metrics>(registry);
  metrics_->owned = std::move(owned);
  uploads_ = std::make_unique<ThreadPool>(options_.upload_threads, "write-upload");
  hashes_ = std::make_unique<ThreadPool>(kHashThreads, "write-hash");
  cleanup_ = std::make_unique<ThreadPool>(1, "write-cleanup");
  reaper_ = std::thread([this] { ReapLoop(); });
}

WriteService::~WriteService() {
  if (pages_->pending_files() == this) pages_->SetPendingFiles(nullptr);
  // First: the write-back threads commit through this service (its members, write_back_
  // itself) and must be gone before any of it is.
  if (write_back_ != nullptr) write_back_->Stop();
  std::map<uint64_t, std::shared_ptr<OpenFile>> left;
  {
    MutexLock l(&open_mu_);
    stopping_ = true;
    left.swap(open_);
  }
  stop_cv_.NotifyAll();
  if (reaper_.joinable()) reaper_.join();
  if (!left.empty()) spdlog::info("discarding {} file(s) still open for writing", left.size());
  left.clear();         // Each session's destructor aborts its upload and removes its spool file.
  cleanup_.reset();     // Sessions let go of (their uploads may still report to write_back_).
  write_back_.reset();  // Keeps the journal's pending files for the next start.
  uploads_.reset();
}

// ---- Readers of pending files ---------------------------------------------------------------

PendingFiles::Entry WriteService::EntryOf(const WriteBack::PendingFile& file) const {
  return Entry{file.path, file.size, protocol::PendingVersion(write_back_->epoch(), file.id),
               file.closed_at_ms * 1'000'000};
}

std::optional<PendingFiles::Entry> WriteService::PendingStat(const std::string& path) {
  if (write_back_ == nullptr) return std::nullopt;
  std::optional<WriteBack::PendingFile> file = write_back_->PendingOf(path);
  if (!file) return std::nullopt;
  return EntryOf(*file);
}

std::vector<PendingFiles::Entry> WriteService::PendingUnder(const std::string& dir) {
  std::vector<Entry> entries;
  if (write_back_ == nullptr) return entries;
  for (const WriteBack::PendingFile& file : write_back_->PendingUnder(dir)) {
    entries.push_back(EntryOf(file));
  }
  return entries;
}

StatusOr<PendingFiles::Page> WriteService::ReadPendingPage(const protocol::PageRef& page,
                                                           uint32_t page_length) {
  if (write_back_ == nullptr) {
    return FailedPreconditionError("this worker has no write-back files: " + page.version);
  }
  CAIRN_ASSIGN_OR_RETURN(protocol::PendingVersionParts parts,
                         protocol::ParsePendingVersion(page.version));
  const std::string path = (page.mount == "/" ? "" : page.mount) + "/" + page.key;
  if (parts.epoch != write_back_->epoch()) {
    return FailedPreconditionError(path + " changed: " + page.version +
                                   " is from before this worker restarted");
  }
  StatusOr<WriteBack::Opened> opened = write_back_->OpenPending(path, parts.id);
  if (!opened.ok()) {
    if (opened.status().code() != StatusCode::kNotFound) return opened.status();
    return FailedPreconditionError(path + " changed: " + opened.status().message());
  }
  if (opened->fd < 0) return Page{nullptr, std::move(opened->committed_version)};
  const int fd = opened->fd;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (opened->size != page.object_size) {
    return FailedPreconditionError(path + " changed: " + std::to_string(opened->size) +
                                   " bytes pending, the reader expects " +
                                   std::to_string(page.object_size));
  }
  auto bytes = std::make_shared<PageBytes>(page_length);
  const uint64_t base = page.page_index * uint64_t{page.page_size};  // Inside the file (decoded).
  CAIRN_RETURN_IF_ERROR(
      ReadSealedSpool(fd, base, std::span<char>(bytes->data.get(), page_length), path));
  return Page{std::move(bytes), ""};
}

Status WriteService::SyncPath(const std::string& prefix, std::chrono::milliseconds timeout) {
  if (write_back_ == nullptr) return Status::Ok();
  return write_back_->Sync(prefix, timeout);
}

size_t WriteService::open_files() const {
  MutexLock l(&open_mu_);
  return open_.size();
}

StatusOr<WriteReply> WriteService::Serve(const std::string& principal,
                                         const protocol::WriteRequest& request,
                                         const RecheckFn& recheck) {
  if (const auto* open = std::get_if<protocol::OpenWriteRequest>(&request)) {
    return Open(principal, *open);
  }
  if (const auto* remove = std::get_if<protocol::RemovePathRequest>(&request)) {
    return Remove(*remove);
  }
  if (const auto* make_dir = std::get_if<protocol::MakeDirRequest>(&request)) {
    return MakeDir(*make_dir);
  }
  if (const auto* rename = std::get_if<protocol::RenameRequest>(&request)) return Rename(*rename);
  if (const auto* hand_over = std::get_if<protocol::HandOverRequest>(&request)) {
    return HandOver(*hand_over);
  }
  if (const auto* sync = std::get_if<protocol::SyncPathRequest>(&request)) {
    CAIRN_RETURN_IF_ERROR(CheckNormalised(sync->path));
    // Answered before the caller's deadline (a reply after it is a worker that "did not answer
    // in time"), and one request holds a pool thread at most 10 minutes: `cairn sync` asks again.
    const int64_t deadline = sync->deadline_ms;
    const auto wait = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(deadline - std::min<int64_t>(1000, deadline / 4)),
        std::chrono::minutes(10));
    CAIRN_RETURN_IF_ERROR(SyncPath(sync->path, wait));
    return Reply(0, 0);
  }
  const uint64_t handle = protocol::HandleOf(request);
  if (std::holds_alternative<protocol::AbortWriteRequest>(request)) {
    CAIRN_RETURN_IF_ERROR(Find(principal, handle).status());
    std::shared_ptr<OpenFile> file = Take(handle);
    if (file != nullptr) {
      metrics_->aborts->Increment();
      LongOp op(*file);  // The abort of a multipart upload is a source request.
      MutexLock l(&file->mu);
      if (file->session != nullptr && !file->committed) {
        Status aborted = file->session->Abort();
        if (!aborted.ok()) spdlog::warn("abort of {}: {}", file->path, aborted.ToString());
      }
    }
    return Reply(handle, 0);
  }
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<OpenFile> file, Find(principal, handle));
  return ServeFile(*file, request, recheck);
}

std::optional<StatusOr<WriteReply>> WriteService::ServeNow(const std::string& principal,
                                                           const protocol::WriteRequest& request,
                                                           const ParkFn& park) {
  const bool changes = std::holds_alternative<protocol::WritePageRequest>(request) ||
                       std::holds_alternative<protocol::TruncateWriteRequest>(request);
  if (!changes && !std::holds_alternative<protocol::ReadWrittenRequest>(request) &&
      !std::holds_alternative<protocol::KeepWriteRequest>(request)) {
    return InvalidArgumentError("not a request answered from the spool");
  }
  StatusOr<std::shared_ptr<OpenFile>> file = Find(principal, protocol::HandleOf(request));
  if (!file.ok()) return StatusOr<WriteReply>(file.status());
  OpenFile& f = **file;
  // A keep-alive touches nothing the long operations hold (and a commit uploading for minutes
  // must not make its keeper time out).
  if (std::holds_alternative<protocol::KeepWriteRequest>(request)) {
    return ServeFile(f, request, nullptr);
  }
  std::optional<StatusOr<WriteReply>> answer;
  std::vector<ResumeFn> copying;
  {
    // Held while the request is served: no long operation of the file starts meanwhile.
    MutexLock parking(&f.park_mu);
    if (f.MustParkLocked()) {
      f.parked.push_back(park());
      return std::nullopt;
    }
    bool copies = false;
    if (changes) {
      MutexLock l(&f.mu);
      copies = f.committed.has_value();  // It starts a new session (write-back: a copy).
    }
    if (copies) {
      f.parked.push_back(park());
      copying = f.TakeParkedLocked();  // Handed off at once; later requests wait for it.
    } else {
      answer = ServeFile(f, request, nullptr);
    }
  }
  f.HandOff(std::move(copying));
  // The last reference (the file was aborted or closed meanwhile) would destroy its session
  // here, which may ask the source to abort an upload: not on the caller's thread.
  if (file->use_count() == 1) cleanup_->Submit([gone = std::move(*file)] {});
  return answer;
}

StatusOr<WriteReply> WriteService::ServeFile(OpenFile& file, const protocol::WriteRequest& request,
                                             const RecheckFn& recheck) {
  const uint64_t handle = file.handle;
  file.busy.fetch_add(1);
  file.last_used_us = clock().NowMicros();
  StatusOr<WriteReply> reply = InternalError("unhandled write request");
  if (const auto* write = std::get_if<protocol::WritePageRequest>(&request)) {
    reply = Write(file, *write);
  } else if (const auto* truncate = std::get_if<protocol::TruncateWriteRequest>(&request)) {
    reply = Truncate(file, truncate->size);
  } else if (const auto* read = std::get_if<protocol::ReadWrittenRequest>(&request)) {
    reply = ReadWritten(file, *read);
  } else if (std::holds_alternative<protocol::KeepWriteRequest>(request)) {
    reply = Reply(handle, 0);  // Finding the file was the point: it is used now.
  } else {
    reply = Commit(file, recheck);
    if (reply.ok() && std::holds_alternative<protocol::CloseWriteRequest>(request)) {
      CacheClosed(file);
      Take(handle);
    }
  }
  file.last_used_us = clock().NowMicros();
  file.busy.fetch_sub(1);
  return reply;
}

StatusOr<WriteReply> WriteService::Open(const std::string& principal,
                                        const protocol::OpenWriteRequest& request) {
  CAIRN_RETURN_IF_ERROR(CheckNormalised(request.path));
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt at, pages_->ResolvePath(request.path, true));
  const mount::Mount* mount = at.resolved.mount;
  if (mount == nullptr) {
    return FailedPreconditionError(request.path +
                                   " is above the mounts: no file can be made there");
  }
  if (mount->spec.read_only) {
    return FailedPreconditionError("mount " + mount->spec.path + " is read-only");
  }
  if (at.resolved.key.empty()) return InvalidArgumentError(request.path + " is a mount's root");
  if (mount->spec.write_back && write_back_ == nullptr) {
    return FailedPreconditionError("mount " + mount->spec.path +
                                   " is write-back, and this worker has no write-back journal");
  }
  // Before any work (a stat, a spool file, reading the object for an open without truncate);
  // checked again when the file is entered.
  CAIRN_RETURN_IF_ERROR(CheckRoom(principal));
  uint64_t commits_before = 0;  // Commits of the path after this one are caught up with below.
  {
    MutexLock l(&open_mu_);
    commits_before = commits_;
  }

  auto file = std::make_shared<OpenFile>();
  file->principal = principal;
  file->path = request.path;
  file->table = at.table;
  file->mount = mount;
  file->ufs = mount->ufs;
  file->key = at.resolved.key;
  file->exclusive = request.exclusive;
  file->write_back = mount->spec.write_back;
  file->spool_dir = options_.spool_dirs[next_spool_.fetch_add(1) % options_.spool_dirs.size()];

  // A create that replaces whatever is there, right after the client's lookup found nothing:
  // the client's word stands for the source's (one request fewer per new file). The commit is
  // then conditional on the name being absent, so a wrong word fails the commit (write-through:
  // the close; write-back: the file is set aside as a conflict) and overwrites nothing.
  const bool take_clients_word =
      request.seen_absent && request.create && request.truncate && !request.exclusive;
  StatusOr<ufs::ObjectInfo> current =
      take_clients_word ? StatusOr<ufs::ObjectInfo>(NotFoundError("seen absent by the client"))
                        : file->ufs->Stat(file->key);
  if (take_clients_word) metrics_->opens_seen_absent->Increment();
  // A write-back file closed but not yet uploaded is the file's current content.
  std::optional<WriteBack::Latest> pending;
  if (file->write_back) pending = write_back_->LatestFor(file->path);
  struct FdCloser {
    std::optional<WriteBack::Latest>& p;
    ~FdCloser() {
      if (p) ::close(p->fd);
    }
  } closer{pending};
  // Write-back keeps working while the source is unreachable for a file that replaces whatever
  // is there (create + truncate, as torch.save opens: its commit is then unconditional), and
  // for one that goes on from a file still waiting here (a log appended to through an outage:
  // it expects what the waiting files expect, below). Neither needs the source's answer.
  const bool unreachable = !current.ok() && current.status().code() != StatusCode::kNotFound;
  const bool blind =
      file->write_back && unreachable &&
      ((request.create && request.truncate && !request.exclusive) || pending.has_value());
  // And a create that keeps what is there (a log opened with O_CREAT|O_APPEND, which FUSE
  // sends when its lookup found nothing): it starts empty expecting the name absent, so that
  // an object there after all makes its upload a conflict (set aside, kept), never replaced
  // by the appended part alone. (An open of a file known to exist still needs the source.)
  const bool assume_absent = file->write_back && unreachable && !blind && request.create &&
                             !request.exclusive && !request.truncate;
  if (unreachable && !blind && !assume_absent) return current.status();
  const bool exists = current.ok() || pending.has_value();
  if (exists && request.exclusive) {
    return AlreadyExistsError(request.path + " exists (exclusive create)");
  }
  if (!exists && !request.create) return NotFoundError("no such file " + request.path);
  // A directory is no file to write: the name would become both. (A client that saw the name
  // absent moments ago says so, take_clients_word: FUSE's lookup, which rules a directory out
  // in the kernel, or a library client's cached "absent" of the last seconds, which a
  // directory made meanwhile by another client can outdate. Not the other workers' waiting
  // files: a question to each per create costs more than that rare case is worth.)
  if ((current.ok() && current->is_dir) || (!exists && !take_clients_word && !unreachable &&
                                            IsDirectory(*file->ufs, file->key, request.path))) {
    return InvalidArgumentError(request.path + " is a directory");
  }

  if (file->write_back) {
    // What the file starts with is on this worker's disk until it goes up: its room is taken
    // before anything is read, so an open refused for room (the client tries again while
    // uploads make some) costs no source read. The file's destructor gives it back.
    const uint64_t starts_with = request.truncate ? 0
                                 : pending        ? pending->size
                                 : current.ok()   ? current->size
                                                  : 0;
    file->room = write_back_.get();
    MutexLock l(&file->mu);
    CAIRN_RETURN_IF_ERROR(file->ReserveRoom(starts_with));
  }
  write::WriteSessionOptions session_options = SessionOptions(request.path, file->write_back);
  session_options.condition = current.ok() ? ufs::WriteCondition::Version(current->version)
                              : blind      ? ufs::WriteCondition::None()
                                           : ufs::WriteCondition::Absent();
  // Files of the path waiting here come first: this one goes after them, and expects what the
  // oldest of them expects (whatever the source holds now, or a stat could say), until their
  // commits set the version they make (AdoptCommit).
  if (pending) {
    if (std::optional<ufs::WriteCondition> waiting = write_back_->OldestCondition(file->path)) {
      session_options.condition = std::move(*waiting);
    }
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<write::WriteSession> session,
                         write::WriteSession::Create(file->ufs, file->key, file->spool_dir,
                                                     session_options, uploads_.get()));
  // The queue's commit of the pending file sets this file's condition (AdoptCommit).
  if (pending && !request.truncate) {
    std::optional<write::SpoolDigest> digest;
    if (pending->digest_part_size != 0) {
      digest = write::SpoolDigest{pending->digest_part_size, pending->digest};
    }
    CAIRN_ASSIGN_OR_RETURN(session, SessionFromFd(*file, pending->fd, pending->size,
                                                  session_options.condition, digest));
  }
  // Without truncate the file starts as the object is now (a partial rewrite keeps the rest).
  if (!pending && exists && !request.truncate && current->size > 0) {
    std::vector<char> chunk(std::min<uint64_t>(kCopyChunk, current->size));
    for (uint64_t done = 0; done < current->size;) {
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(chunk.size(), current->size - done));
      CAIRN_ASSIGN_OR_RETURN(size_t n, file->ufs->Read(file->key, current->version, done,
                                                       std::span<char>(chunk.data(), want)));
      if (n == 0) return FailedPreconditionError(request.path + " shrank while it was opened");
      CAIRN_RETURN_IF_ERROR(session->Write(done, std::span<const char>(chunk.data(), n)));
      done += n;
    }
  }
  const uint64_t size = session->size();
  {
    MutexLock l(&file->mu);
    // The room held is the session's size (it may differ from the stat's if the object changed).
    CAIRN_RETURN_IF_ERROR(file->ReserveRoom(size));
    file->ShrinkRoom(size);
    file->session = std::move(session);
  }
  file->last_used_us = clock().NowMicros();
  std::optional<std::string> missed;  // The last commit of the path AdoptCommit could not tell.
  {
    MutexLock l(&open_mu_);
    CAIRN_RETURN_IF_ERROR(CheckRoomLocked(principal));
    do {
      file->handle = RandomHandle();
    } while (open_.count(file->handle) != 0);
    ++open_by_principal_[principal];
    open_.emplace(file->handle, file);
    metrics_->open->Set(static_cast<double>(open_.size()));
    if (auto it = last_commit_.find(file->path);
        it != last_commit_.end() && it->second.first > commits_before) {
      missed = it->second.second;
    }
  }
  if (missed && !file->exclusive) {
    // A commit of the path (another writer's close, a queued upload) landed while this open
    // read what it starts from: it expects that version, as AdoptCommit would have told it,
    // unless a later commit told it since.
    MutexLock l(&file->mu);
    if (file->session != nullptr && !file->committed &&
        file->session->condition() == session_options.condition) {
      file->session->SetCondition(ufs::WriteCondition::Version(*missed));
    }
  }
  WriteReply opened = Reply(file->handle, size);
  opened.idle_timeout_ms = static_cast<uint32_t>(
      std::clamp<int64_t>(options_.idle_timeout.count(), 1, std::numeric_limits<uint32_t>::max()));
  return opened;
}

Status WriteService::CheckRoom(const std::string& principal) {
  MutexLock l(&open_mu_);
  return CheckRoomLocked(principal);
}

Status WriteService::CheckRoomLocked(const std::string& principal) const {
  if (stopping_) return UnavailableError("the worker is stopping");
  if (open_.size() >= options_.max_open_files) {
    return ResourceExhaustedError("this worker has " + std::to_string(open_.size()) +
                                  " files open for writing (its limit)")
        .WithReason(StatusReason::kTooManyOpenFiles);
  }
  auto mine = open_by_principal_.find(principal);
  if (mine != open_by_principal_.end() && mine->second >= options_.max_open_files_per_principal) {
    return ResourceExhaustedError("too many files open for writing by " +
                                  (principal.empty() ? std::string("anonymous") : principal))
        .WithReason(StatusReason::kTooManyOpenFiles);
  }
  return Status::Ok();
}

StatusOr<WriteReply> WriteService::Write(OpenFile& file,
                                         const protocol::WritePageRequest& request) {
  if (ChunkChecksums(request.data) != request.checksums) {
    metrics_->checksum_failures->Increment();
    return CorruptionError("write data for " + file.path + " does not match its checksums");
  }
  MutexLock l(&file.mu);
  if (file.committed) {
    CAIRN_ASSIGN_OR_RETURN(file.session, Continue(file, file.session.get(), file.sealed_fd,
                                                  file.sealed_digest, *file.committed));
    file.committed.reset();
  }
  CAIRN_RETURN_IF_ERROR(file.ReserveRoom(
      std::max<uint64_t>(file.session->size(), request.offset + request.data.size())));
  CAIRN_RETURN_IF_ERROR(file.session->Write(request.offset, request.data));
  metrics_->bytes->Increment(request.data.size());
  return Reply(file.handle, file.session->size());
}

StatusOr<WriteReply> WriteService::Truncate(OpenFile& file, uint64_t size) {
  MutexLock l(&file.mu);
  if (file.committed) {
    if (file.committed->size == size) return Reply(file.handle, size);
    CAIRN_ASSIGN_OR_RETURN(file.session, Continue(file, file.session.get(), file.sealed_fd,
                                                  file.sealed_digest, *file.committed));
    file.committed.reset();
  }
  CAIRN_RETURN_IF_ERROR(file.ReserveRoom(size));
  CAIRN_RETURN_IF_ERROR(file.session->Truncate(size));
  file.ShrinkRoom(size);
  return Reply(file.handle, file.session->size());
}

write::WriteSessionOptions WriteService::SessionOptions(const std::string& path, bool write_back) {
  write::WriteSessionOptions o;
  o.part_size = options_.part_size;
  o.whole_put_bytes = options_.whole_put_bytes;
  o.upload_early = !write_back;
  // A write-back close waits for the spool to be on disk: start that while the file is written.
  if (write_back) o.write_behind_bytes = kWriteBehindBytes;
  if (write_back) o.before_complete = [] { CrashPoint("write-back-uploading"); };
  // A write-back file waits on disk for its upload: what is uploaded must be what was written.
  if (write_back) {
    o.digest = true;
    o.hash_pool = hashes_.get();
  }
  o.max_uploads_in_flight = options_.max_uploads_in_flight;
  if (write_back_ != nullptr) {
    // The journal notes each upload begun in the source, so that the next start can abort what
    // a crash left there (docs/write-journal.md, type 4).
    WriteBack* journal = write_back_.get();
    o.on_upload_begun = [journal, path](const std::string& token) {
      journal->UploadBegun(path, token);
    };
    o.on_upload_ended = [journal](const std::string& token) { journal->UploadEnded(token); };
  }
  return o;
}

size_t WriteService::AbortLeftoverUploads() {
  if (write_back_ == nullptr) return 0;
  size_t ended = 0;
  for (const write::JournalRecord& upload : write_back_->LeftoverUploads()) {
    // Not waiting for the mount table: a mount not known yet is tried again next round.
    StatusOr<PageService::PathAt> at = pages_->ResolvePath(upload.path, /*wait=*/false);
    if (!at.ok() || at->resolved.mount == nullptr || at->resolved.key.empty()) continue;
    Status st = at->resolved.mount->ufs->AbortUpload(at->resolved.key, upload.detail);
    const StatusCode code = st.code();
    if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
        code == StatusCode::kIoError) {
      spdlog::debug("abort of the upload a crash left for {}: {} (tried again later)", upload.path,
                    st.ToString());
      continue;
    }
    if (st.ok()) {
      spdlog::info("aborted the upload of {} that the last process left in its source",
                   upload.path);
    } else {
      spdlog::warn("the upload of {} that the last process left cannot be aborted: {}", upload.path,
                   st.ToString());
    }
    write_back_->LeftoverEnded(upload.id);
    ++ended;
  }
  return ended;
}

StatusOr<std::unique_ptr<write::WriteSession>> WriteService::SessionFromFd(
    const OpenFile& file, int fd, uint64_t size, ufs::WriteCondition condition,
    const std::optional<write::SpoolDigest>& digest) {
  write::WriteSessionOptions session_options = SessionOptions(file.path, file.write_back);
  session_options.condition = std::move(condition);
  if (digest) {  // Reopen checks the copy, and its hashes stand for the bytes at the next Seal.
    session_options.part_size = digest->part_size;
    session_options.expected_digest = digest->value;
  }
  CAIRN_ASSIGN_OR_RETURN(std::string copy, write::CopySpoolFile(fd, size, file.spool_dir));
  StatusOr<std::unique_ptr<write::WriteSession>> next = write::WriteSession::Reopen(
      file.ufs, file.key, copy, size, std::move(session_options), uploads_.get());
  if (next.ok()) return next;
  ::unlink(copy.c_str());
  if (next.status().code() != StatusCode::kCorruption) return next.status();
  // Not Corruption to the client, which takes that for bytes damaged on the way and sends the
  // write again (each try would copy and hash the whole file again): an I/O error it keeps.
  spdlog::error("the waiting file of {} is damaged on disk ({}): not continued", file.path,
                next.status().message());
  return IoError("the waiting file of " + file.path +
                 " is damaged on disk: it cannot be written to (" + next.status().message() + ")");
}

StatusOr<std::unique_ptr<write::WriteSession>> WriteService::Continue(
    const OpenFile& file, write::WriteSession* committed_session, int sealed_fd,
    const std::optional<write::SpoolDigest>& sealed_digest, const ufs::ObjectInfo& committed) {
  if (file.write_back) {
    return SessionFromFd(file, sealed_fd, committed.size,
                         ConditionAfterSync(file, committed.version), sealed_digest);
  }
  if (committed_session == nullptr) {
    return InternalError("no committed session of " + file.path + " to continue");
  }
  write::WriteSessionOptions session_options = SessionOptions(file.path, file.write_back);
  session_options.condition = ufs::WriteCondition::Version(committed.version);
  CAIRN_ASSIGN_OR_RETURN(
      std::unique_ptr<write::WriteSession> next,
      write::WriteSession::Reopen(file.ufs, file.key, committed_session->spool_path(),
                                  committed.size, std::move(session_options), uploads_.get()));
  committed_session->KeepSpoolFile();  // Now the next session's.
  return next;
}

bool WriteService::PendingInFolder(const std::string& dir, bool ask_peers) const {
  if (write_back_ != nullptr && !write_back_->PendingUnder(dir).empty()) return true;
  return ask_peers && options_.pending_at_peers && !options_.pending_at_peers(dir).empty();
}

bool WriteService::IsDirectory(ufs::UnderStorage& ufs, const std::string& key,
                               const std::string& path) const {
  if (PendingInFolder(path, /*ask_peers=*/false)) return true;
  ufs::ListOptions probe;
  probe.prefix = key + "/";
  probe.max_keys = 1;
  // Mostly answered by the absence cache (a new name in a folder listed lately). A source that
  // cannot answer is taken to hold no directory there (the caller does not ask one whose stat
  // just failed: write-back creates go on through an outage without a second wait).
  StatusOr<ufs::ListResult> listed = ufs.List(probe);
  return listed.ok() &&
         (!listed->objects.empty() || !listed->common_prefixes.empty() || listed->directory_exists);
}

ufs::WriteCondition WriteService::ConditionAfterSync(const OpenFile& file,
                                                     const std::string& adopted) {
  // Set by AdoptCommit when a queued file of this path was committed since the sync.
  if (!adopted.empty()) return ufs::WriteCondition::Version(adopted);
  // Still queued: what the oldest waiting file expects (its commit will set this session's
  // condition to the version it makes; if it is set aside, this file is too, rather than
  // replacing what someone else put there).
  if (std::optional<ufs::WriteCondition> waiting = write_back_->OldestCondition(file.path)) {
    return *waiting;
  }
  StatusOr<ufs::ObjectInfo> now = file.ufs->Stat(file.key);
  if (now.ok()) return ufs::WriteCondition::Version(now->version);
  return ufs::WriteCondition::Absent();
}

StatusOr<WriteReply> WriteService::ReadWritten(OpenFile& file,
                                               const protocol::ReadWrittenRequest& request) {
  WriteReply reply = Reply(file.handle, 0);
  reply.data.resize(request.length);
  std::span<char> out(reply.data.data(), reply.data.size());
  MutexLock l(&file.mu);
  if (file.session != nullptr) {
    reply.size = file.session->size();
    CAIRN_ASSIGN_OR_RETURN(size_t n, file.session->ReadAt(request.offset, out));
    reply.data.resize(n);
    return reply;
  }
  // A write-back file closed through this handle (its session went to the queue): the sealed
  // spool file holds exactly the committed bytes.
  if (file.sealed_fd < 0 || !file.committed) {
    return FailedPreconditionError(file.path + " has nothing written to read");
  }
  reply.size = file.committed->size;
  const uint64_t end = std::min<uint64_t>(reply.size, request.offset + request.length);
  const size_t want = request.offset < end ? static_cast<size_t>(end - request.offset) : 0;
  CAIRN_RETURN_IF_ERROR(
      ReadSealedSpool(file.sealed_fd, request.offset, out.first(want), file.path));
  reply.data.resize(want);
  return reply;
}

StatusOr<WriteReply> WriteService::Commit(OpenFile& file, const RecheckFn& recheck) {
  if (file.write_back) return CommitBack(file, recheck);
  LongOp op(file);  // It uploads what is left of the file.
  // The path's commit lock first (see the lock order in the header).
  PathLocks::Held commit = commit_locks_.Lock(file.path);
  MutexLock l(&file.mu);
  if (file.committed) {
    WriteReply reply = Reply(file.handle, file.committed->size);
    reply.version = file.committed->version;
    reply.mtime_ns = file.committed->mtime_ns;
    return reply;
  }
  if (recheck) CAIRN_RETURN_IF_ERROR(recheck(file.path));
  StatusOr<ufs::ObjectInfo> info = file.session->Commit();
  if (info.ok()) AdoptCommit(&file, file.path, info->version);
  if (!info.ok()) {
    metrics_->commit_failures->Increment();
    return info.status().WithContext("commit of " + file.path);
  }
  metrics_->commits->Increment();
  file.committed = *info;
  WriteReply reply = Reply(file.handle, info->size);
  reply.version = info->version;
  reply.mtime_ns = info->mtime_ns;
  return reply;
}

// Not under the path's commit lock: the queue's commit of this path's earlier file may hold it
// while it waits for this file's lock (AdoptCommit), and the journal needs neither. Nor does
// it wait for room under the file's lock, for the same reason: the upload that makes room
// adopts its version into this path's open files.
StatusOr<WriteReply> WriteService::CommitBack(OpenFile& file, const RecheckFn& recheck) {
  const auto deadline = std::chrono::steady_clock::now() + write_back_->full_wait();
  for (;;) {
    uint64_t size = 0;
    uint64_t reserved = 0;
    Status no_room;
    StatusOr<std::optional<WriteReply>> added = InternalError("not added");
    {
      LongOp op(file);  // A seal syncs the spool file to disk; not the wait for room below.
      added = AddClosed(file, recheck, &size, &reserved, &no_room);
    }
    if (added.ok() && *added) return std::move(**added);
    if (!added.ok() || std::chrono::steady_clock::now() >= deadline) {
      metrics_->commit_failures->Increment();
      return (added.ok() ? no_room : added.status()).WithContext("close of " + file.path);
    }
    write_back_->WaitForRoom(size, reserved, deadline);
  }
}

StatusOr<std::optional<WriteReply>> WriteService::AddClosed(OpenFile& file,
                                                            const RecheckFn& recheck,
                                                            uint64_t* size, uint64_t* reserved,
                                                            Status* no_room) {
  MutexLock l(&file.mu);
  if (file.committed) return std::optional(Reply(file.handle, file.committed->size));
  if (recheck) CAIRN_RETURN_IF_ERROR(recheck(file.path));
  // Room first, before the session is sealed: a sealed session takes no more writes, and the
  // caller waits for room without this lock (writes of the file go on meanwhile, unless the
  // room went to others during the seal: below).
  if (Status room = write_back_->RoomFor(file.session->size(), file.reserved); !room.ok()) {
    *size = file.session->size();
    *reserved = file.reserved;
    *no_room = std::move(room);
    return std::optional<WriteReply>();
  }
  CAIRN_RETURN_IF_ERROR(file.session->Seal());
  // The spool file's name too: the journal record about to promise it names that file, and a
  // start sweeps the spool files no record names (one fsync per close; the name is usually in
  // the file system journal already, committed by the file's own sync).
  CAIRN_RETURN_IF_ERROR(SyncFolderOf(file.session->spool_path()));
  const int sealed_fd = ::open(file.session->spool_path().c_str(), O_RDONLY | O_CLOEXEC);
  if (sealed_fd < 0) return ErrnoToStatus(errno, "reopen spool file of " + file.path);
  PendingWrite pending;
  pending.record.path = file.path;
  pending.record.principal = file.principal;
  pending.record.spool_path = file.session->spool_path();
  pending.record.size = file.session->size();
  pending.record.condition = file.session->condition();
  pending.record.closed_at_ms = clock().WallNanos() / 1'000'000;
  if (std::optional<uint64_t> digest = file.session->digest()) {
    pending.record.digest_part_size = file.session->part_size();
    pending.record.digest = *digest;
  }
  *size = pending.record.size;
  pending.session = std::move(file.session);
  StatusOr<uint64_t> id = write_back_->Add(pending, file.reserved);
  if (!id.ok()) {
    // Nothing was promised; the sealed session stays with the handle (a close may be retried).
    file.session = std::move(pending.session);
    ::close(sealed_fd);
    if (id.status().code() != StatusCode::kResourceExhausted) return id.status();
    // The room RoomFor saw went to others during the seal: the caller waits for room without
    // this file's lock (an upload that makes room takes it, AdoptCommit) and comes back; the
    // session stays sealed (Seal again is cheap: the digest is made, the disk synced).
    *reserved = file.reserved;
    *no_room = id.status();
    return std::optional<WriteReply>();
  }
  file.reserved = 0;  // Now the queue's.
  metrics_->commits->Increment();
  if (file.sealed_fd >= 0) ::close(file.sealed_fd);
  file.sealed_fd = sealed_fd;
  file.sealed_digest.reset();
  if (pending.record.digest_part_size != 0) {
    file.sealed_digest = write::SpoolDigest{pending.record.digest_part_size, pending.record.digest};
  }
  ufs::ObjectInfo info;
  info.size = *size;
  info.mtime_ns = clock().WallNanos();
  file.committed = info;
  WriteReply reply = Reply(file.handle, *size);
  reply.mtime_ns = info.mtime_ns;
  return std::optional(std::move(reply));
}

CommitResult WriteService::CommitPending(PendingWrite& write) {
  const write::JournalRecord& record = write.record;
  auto retry = [](const Status& why) {
    return CommitResult{CommitResult::Outcome::kRetry, why.ToString(), why.outcome_unknown()};
  };
  // Resolved now, not at close: after a restart the mount table may still be loading (then
  // this is retried), and a mount replaced meanwhile is where the file goes now.
  StatusOr<PageService::PathAt> at = pages_->ResolvePath(record.path, true);
  if (!at.ok()) return retry(at.status());
  const mount::Mount* mount = at->resolved.mount;
  if (mount == nullptr || at->resolved.key.empty() || mount->spec.read_only) {
    return retry(FailedPreconditionError("no writable mount holds " + record.path + " now"));
  }
  const std::string& key = at->resolved.key;
  PathLocks::Held commit = commit_locks_.Lock(record.path);
  if (write_back_->Cancelled(record.id)) {
    return CommitResult{CommitResult::Outcome::kRemoved, "removed before its upload"};
  }
  const bool replayed = write.session == nullptr;
  if (replayed) {
    write::WriteSessionOptions session_options = SessionOptions(record.path, true);
    session_options.condition = record.condition;
    if (record.digest_part_size != 0) {  // Checked against the spool as the upload reads it.
      session_options.part_size = record.digest_part_size;
      session_options.expected_digest = record.digest;
    }
    StatusOr<std::unique_ptr<write::WriteSession>> adopted = write::WriteSession::Adopt(
        mount->ufs, key, record.spool_path, record.size, session_options, uploads_.get());
    // Its spool file gone or short: nothing can bring it back (retrying would spin forever).
    // A short one is kept for an operator as any conflict (else the next start sweeps it).
    if (!adopted.ok() && (adopted.status().code() == StatusCode::kCorruption ||
                          adopted.status().code() == StatusCode::kNotFound)) {
      std::string kept_at;
      if (adopted.status().code() == StatusCode::kCorruption) {
        StatusOr<std::string> kept = SetAside(write);
        if (!kept.ok()) return retry(kept.status());
        kept_at = "; kept at " + *kept;
      }
      spdlog::error("write-back: {} cannot be uploaded: {}{}", record.path,
                    adopted.status().ToString(), kept_at);
      return CommitResult{CommitResult::Outcome::kConflict, adopted.status().ToString() + kept_at};
    }
    if (!adopted.ok()) return retry(adopted.status());
    write.session = std::move(*adopted);
  }
  StatusOr<ufs::ObjectInfo> info = InternalError("not committed");
  // A file replayed after a restart may have been committed just before it (its end never
  // journaled): if the source holds these very bytes, nothing is uploaded again. (A
  // conditional commit would find out by failing; an unconditional one would not.)
  std::optional<ufs::ObjectInfo> already;
  if (replayed) already = SourceHolds(*mount->ufs, key, record.spool_path, record.size);
  if (already) {
    spdlog::info("write-back: {} is already in its source (version {})", record.path,
                 already->version);
    info = *already;
  } else {
    info = write.session->Commit();  // Crash point "write-back-uploading" inside.
  }
  if (!info.ok() && write.session->spool_damaged()) {
    // Retrying would read the same damaged bytes: kept for an operator, never uploaded.
    metrics_->damaged_spools->Increment();
    StatusOr<std::string> kept = SetAside(write);
    if (!kept.ok()) return retry(kept.status());
    spdlog::error("write-back: {} was not uploaded: {}; the closed file is kept at {}", record.path,
                  info.status().ToString(), *kept);
    return CommitResult{CommitResult::Outcome::kConflict,
                        info.status().ToString() + "; kept at " + *kept};
  }
  if (!info.ok() && (info.status().code() == StatusCode::kAlreadyExists ||
                     info.status().code() == StatusCode::kFailedPrecondition)) {
    // Our own commit before a crash (its end never journaled) looks like this too.
    std::optional<ufs::ObjectInfo> same =
        SourceHolds(*mount->ufs, key, record.spool_path, record.size);
    if (!same) {
      StatusOr<std::string> kept = SetAside(write);
      // Retried as a file that may have landed if this attempt's commit might have (a 5xx,
      // then the retry's 412 on its own object, which SourceHolds could not read back).
      if (!kept.ok()) {
        return retry(info.status().outcome_unknown() ? kept.status().WithOutcomeUnknown()
                                                     : kept.status());
      }
      spdlog::error(
          "write-back: {} changed in its source since it was opened ({}); the closed "
          "file was not uploaded and is kept at {}",
          record.path, info.status().ToString(), *kept);
      return CommitResult{CommitResult::Outcome::kConflict,
                          info.status().ToString() + "; kept at " + *kept};
    }
    spdlog::info("write-back: {} is already in its source (version {})", record.path,
                 same->version);
    info = *same;
  }
  if (!info.ok()) return retry(info.status());
  CrashPoint("write-back-committed");
  // The queue first (an open that sees this commit counted sees the file as landed), then the
  // open files, then the queue again: a file closed in between was queued with the condition
  // its open file had before.
  write_back_->AdoptCommit(record.path, info->version);
  AdoptCommit(nullptr, record.path, info->version);
  write_back_->AdoptCommit(record.path, info->version);
  CacheWritten(at->table, mount, key, *info, write.session->spool_path());
  return CommitResult{CommitResult::Outcome::kCommitted, info->version};
}

std::optional<ufs::ObjectInfo> WriteService::SourceHolds(ufs::UnderStorage& ufs,
                                                         const std::string& key,
                                                         const std::string& spool_path,
                                                         uint64_t size) {
  StatusOr<ufs::ObjectInfo> now = ufs.Stat(key);
  if (!now.ok() || now->is_dir || now->size != size) return std::nullopt;
  const int fd = ::open(spool_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<char> ours(std::min<uint64_t>(kCopyChunk, std::max<uint64_t>(size, 1)));
  std::vector<char> theirs(ours.size());
  bool same = true;
  for (uint64_t done = 0; done < size && same;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(ours.size(), size - done));
    StatusOr<size_t> got = ufs.Read(key, now->version, done, std::span<char>(theirs.data(), want));
    const ssize_t n = ::pread(fd, ours.data(), want, static_cast<off_t>(done));
    same = got.ok() && *got == want && n == static_cast<ssize_t>(want) &&
           std::equal(ours.begin(), ours.begin() + static_cast<ptrdiff_t>(want), theirs.begin());
    done += want;
  }
  ::close(fd);
  if (!same) return std::nullopt;
  return *now;
}

StatusOr<std::string> WriteService::SetAside(const PendingWrite& write) {
  const std::filesystem::path spool(write.record.spool_path);
  const std::filesystem::path folder = spool.parent_path() / "conflicts";
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  std::string name = write.record.path;
  std::replace(name.begin(), name.end(), '/', '_');
  name = name.substr(0, 200);
  // Never over a file kept before: ids start again after a restart whose journal had nothing
  // pending, and the same job conflicts on the same paths in the same order.
  std::filesystem::path kept;
  for (int copy = 0; !ec; ++copy) {
    kept = folder / (std::to_string(write.record.id) +
                     (copy == 0 ? "" : "." + std::to_string(copy)) + "-" + name);
    const int err = RenameNoReplace(spool.string(), kept.string());
    if (err == EEXIST && copy < 1000) continue;
    if (err != 0) ec = std::error_code(err, std::generic_category());
    break;
  }
  if (ec) {
    // Not moved: the file stays pending (its spool file and journal record kept), and setting
    // it aside is tried again with the next attempt. Finishing it now would let the spool file
    // go with the session, or with the next start's sweep of unknown spool files.
    return IoError("the closed file " + write.record.path + " could not be set aside in " +
                   folder.string() + ": " + ec.message());
  }
  // Both names durable before the record that named the spool file is finished: else a power
  // loss could bring the file back under its spool name, which no record names then, and the
  // start's sweep removes it. Moved already, so a failure cannot undo anything: said, not
  // returned.
  for (const std::filesystem::path& changed : {kept, spool}) {
    if (Status synced = SyncFolderOf(changed.string()); !synced.ok()) {
      spdlog::warn("the file {} set aside as {}: {}", write.record.path, kept.string(),
                   synced.ToString());
    }
  }
  if (write.session != nullptr) write.session->KeepSpoolFile();
  return kept.string();
}

void WriteService::CacheWritten(std::shared_ptr<const mount::MountTable> table,
                                const mount::Mount* mount, const std::string& key,
                                const ufs::ObjectInfo& info, const std::string& spool_path) {
  if (options_.written_pages == nullptr) return;
  const int fd = ::open(spool_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    spdlog::warn("the written file {} does not enter the cache: {}", key,
                 ErrnoToStatus(errno, "reopen its spool").ToString());
    return;
  }
  WrittenFile written;
  written.table = std::move(table);
  written.mount = mount;
  written.key = key;
  written.version = info.version;
  written.size = info.size;
  options_.written_pages->Admit(std::move(written), fd);  // Not cached is not an error.
}

// At close, not at every sync: a log synced after each line would be cached over and over.
void WriteService::CacheClosed(OpenFile& file) {
  if (options_.written_pages == nullptr || file.write_back) return;
  MutexLock l(&file.mu);
  if (file.session == nullptr || !file.committed) return;
  CacheWritten(file.table, file.mount, file.key, *file.committed, file.session->spool_path());
}

void WriteService::AdoptCommit(const OpenFile* committer, const std::string& path,
                               const std::string& version) {
  std::vector<std::shared_ptr<OpenFile>> siblings;
  {
    MutexLock l(&open_mu_);
    ++commits_;
    last_commit_[path] = {commits_, version};
    last_commit_order_.emplace_back(path, commits_);
    while (last_commit_order_.size() > kRecentCommitPaths) {
      const auto& [old_path, seq] = last_commit_order_.front();
      if (auto it = last_commit_.find(old_path);
          it != last_commit_.end() && it->second.first == seq) {
        last_commit_.erase(it);
      }
      last_commit_order_.pop_front();
    }
    for (const auto& [handle, file] : open_) {
      if (file.get() != committer && file->path == path && !file->exclusive) {
        siblings.push_back(file);
      }
    }
  }
  // A sibling's own lock may be held by a write in progress (short), never by a commit: a
  // commit takes this path's commit lock, which the caller holds, before it.
  for (const auto& file : siblings) {
    MutexLock l(&file->mu);
    if (file->session != nullptr && !file->committed) {
      file->session->SetCondition(ufs::WriteCondition::Version(version));
    } else if (file->write_back && file->committed && file->committed->version.empty()) {
      file->committed->version = version;  // ConditionAfterSync: what a later write replaces.
    }
  }
}

StatusOr<PageService::PathAt> WriteService::ChangeablePath(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(CheckNormalised(path));
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt at, pages_->ResolvePath(path, true));
  const mount::Mount* mount = at.resolved.mount;
  if (mount == nullptr || at.resolved.key.empty()) {
    return InvalidArgumentError(path + " is a mount point or above the mounts");
  }
  if (mount->spec.read_only) {
    return FailedPreconditionError("mount " + mount->spec.path + " is read-only");
  }
  return at;
}

StatusOr<WriteReply> WriteService::Remove(const protocol::RemovePathRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt at, ChangeablePath(request.path));
  PathLocks::Held commit = commit_locks_.Lock(request.path);
  if (request.directory) {
    // Files waiting under it, here or at other workers, are in it, as the listings show: their
    // uploads would bring it back.
    if (PendingInFolder(request.path, /*ask_peers=*/at.resolved.mount->spec.write_back)) {
      return FailedPreconditionError(request.path + " is not empty (files not yet uploaded)");
    }
    CAIRN_RETURN_IF_ERROR(at.resolved.mount->ufs->RemoveDir(at.resolved.key));
    metrics_->directories->Increment();
    return Reply(0, 0);
  }
  const bool pending = write_back_ != nullptr && write_back_->HasPending(request.path);
  // A new file never uploaded is not in the source: removing it is cancelling it (which works
  // while the lake is down, as for a rename).
  const bool only_here = pending && write_back_->NeverUploaded(request.path);
  if (!only_here) {
    // The source first: a remove that fails changes nothing, as a failed unlink(2) (the waiting
    // files stay and are uploaded). None of them commits in between: their uploads take the
    // commit lock held here.
    Status deleted = at.resolved.mount->ufs->Delete(at.resolved.key);
    if (!(pending && deleted.code() == StatusCode::kNotFound)) CAIRN_RETURN_IF_ERROR(deleted);
  }
  // Never committed after the removal; a journal that cannot say so fails the remove (EIO),
  // though done: the files would come back after a restart.
  if (pending) CAIRN_RETURN_IF_ERROR(write_back_->CancelPath(request.path));
  metrics_->removes->Increment();
  return Reply(0, 0);
}

StatusOr<WriteReply> WriteService::MakeDir(const protocol::MakeDirRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt at, ChangeablePath(request.path));
  PathLocks::Held commit = commit_locks_.Lock(request.path);
  CAIRN_RETURN_IF_ERROR(at.resolved.mount->ufs->MakeDir(at.resolved.key));
  metrics_->directories->Increment();
  return Reply(0, 0);
}

// The worker that owns `to` (where the new name becomes visible) serialises the rename with the
// commits of both names it sees; a commit of `from` elsewhere can still race it, as it can race
// a remove.
StatusOr<WriteReply> WriteService::Rename(const protocol::RenameRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt from, ChangeablePath(request.from));
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt to, ChangeablePath(request.to));
  // As every source refuses it (a copy onto itself then a delete would lose the object).
  if (request.from == request.to) {
    return InvalidArgumentError("rename of " + request.from + " onto itself");
  }
  // Before any wait for an upload: `mv` copies instead at once.
  if (from.resolved.mount->spec.path != to.resolved.mount->spec.path) {
    return UnimplementedError("rename from mount " + from.resolved.mount->spec.path + " to " +
                              to.resolved.mount->spec.path + ": a rename stays in one mount");
  }
  if (write_back_ != nullptr && from.resolved.mount == to.resolved.mount &&
      write_back_->HasPending(request.from)) {
    StatusOr<std::optional<WriteReply>> moved = RenamePending(request, from, to);
    if (!moved.ok()) return moved.status();
    if (*moved) return std::move(**moved);
  }
  if (write_back_ != nullptr) {
    // The source renames what it holds: the closed files of both names must be there first (a
    // file of `to` committed after the rename would replace what was renamed onto it).
    CAIRN_RETURN_IF_ERROR(write_back_->Sync(request.from, options_.rename_wait)
                              .WithContext("rename waits for the upload of " + request.from));
    CAIRN_RETURN_IF_ERROR(write_back_->Sync(request.to, options_.rename_wait)
                              .WithContext("rename waits for the upload of " + request.to));
  }
  // Both names' commit locks (in name order: two renames cannot deadlock).
  PathLocks::Held locked = commit_locks_.Lock(request.from, request.to);
  ufs::RenameOptions options;
  if (request.no_replace) options.condition = ufs::WriteCondition::Absent();
  CAIRN_ASSIGN_OR_RETURN(ufs::ObjectInfo moved, from.resolved.mount->ufs->Rename(
                                                    from.resolved.key, to.resolved.key, options));
  metrics_->renames->Increment();
  WriteReply reply = Reply(0, moved.is_dir ? 0 : moved.size);
  if (!moved.is_dir) reply.version = std::move(moved.version);
  reply.mtime_ns = moved.mtime_ns;
  return reply;
}

StatusOr<std::optional<WriteReply>> WriteService::RenamePending(
    const protocol::RenameRequest& request, const PageService::PathAt& from,
    const PageService::PathAt& to) {
  const auto deadline = std::chrono::steady_clock::now() + options_.rename_wait;
  bool holding = false;  // WriteBack::Hold's.
  for (;;) {
    // Let go of after the locks, on the cleanup thread: destroying a session waits for its
    // part uploads in flight and aborts its upload, which the rename need not wait for.
    std::vector<std::unique_ptr<write::WriteSession>> released;
    auto let_go = [this](std::vector<std::unique_ptr<write::WriteSession>>* sessions) {
      if (sessions->empty()) return;
      auto held =
          std::make_shared<std::vector<std::unique_ptr<write::WriteSession>>>(std::move(*sessions));
      cleanup_->Submit([held] { held->clear(); });
    };
    {
      PathLocks::Held locked = commit_locks_.Lock(request.from, request.to);
      switch (write_back_->Hold(request.from, request.to, &holding)) {
        case WriteBack::HoldResult::kNothing:
          return std::optional<WriteReply>();  // Uploaded meanwhile: rename in the source.
        case WriteBack::HoldResult::kBusy:
          break;
        case WriteBack::HoldResult::kHeld: {
          StatusOr<WriteBack::PendingFile> moved =
              MovePending(request, from, to, &holding, &released);
          let_go(&released);
          if (!moved.ok()) return moved.status();
          metrics_->renames->Increment();
          WriteReply reply = Reply(0, moved->size);
          reply.mtime_ns = moved->closed_at_ms * 1'000'000;
          return std::optional<WriteReply>(std::move(reply));
        }
      }
    }
    // One of them is being uploaded (maybe waiting for these very locks): let it finish.
    if (!write_back_->WaitIdle(request.from, request.to, deadline)) {
      write_back_->Unhold(request.from, request.to, &holding);
      return DeadlineExceededError("rename of " + request.from + " waits for its upload");
    }
  }
}

ufs::WriteCondition WriteService::ReplacedByRename(ufs::UnderStorage& ufs, const std::string& key) {
  // The upload to the new name replaces what the source holds there now, as a rename does, and
  // only that: a file someone else puts there after the rename, before the upload lands, is not
  // overwritten (the upload is set aside as a conflict). The stat is mostly answered by the
  // absence cache (the checkpoint idiom renames to a name its folder's listing lacks, which the
  // kernel looked up just before). While the source cannot say (an outage), the upload
  // replaces whatever is there when it lands.
  StatusOr<ufs::ObjectInfo> there = ufs.Stat(key);
  if (there.ok() && !there->is_dir) return ufs::WriteCondition::Version(there->version);
  if (!there.ok() && there.status().code() == StatusCode::kNotFound) {
    return ufs::WriteCondition::Absent();
  }
  return ufs::WriteCondition::None();
}

StatusOr<WriteBack::PendingFile> WriteService::MovePending(
    const protocol::RenameRequest& request, const PageService::PathAt& from,
    const PageService::PathAt& to, bool* holding,
    std::vector<std::unique_ptr<write::WriteSession>>* released) {
  ufs::UnderStorage& ufs = *from.resolved.mount->ufs;
  bool deleted_from = false;
  auto give_up = [&](Status why) {
    // The name is gone from the source: the files of `from` that stay go up on its absence.
    if (deleted_from) {
      write_back_->SetCondition(request.from, ufs::WriteCondition::Absent()).IgnoreError();
    }
    write_back_->Unhold(request.from, request.to, holding);
    return why;
  };
  // Never a file over a directory (the source's own rename refuses it): its upload would find
  // the name taken and set the file aside after the rename was answered.
  // (Not the other workers' waiting files: this is every checkpoint's rename, under two commit
  // locks, and a folder of nothing but other workers' waiting files is rare.)
  if (IsDirectory(ufs, to.resolved.key, request.to)) {
    return give_up(InvalidArgumentError("rename of " + request.from + " onto " + request.to +
                                        ", which is a directory"));
  }
  // A no-replace rename needs the name free, here (no pending file) and in the source, and
  // stays conditional on it.
  ufs::WriteCondition condition = ufs::WriteCondition::None();
  if (request.no_replace) {
    if (write_back_->HasPending(request.to)) {
      return give_up(AlreadyExistsError(request.to + " exists (not yet uploaded)"));
    }
    StatusOr<ufs::ObjectInfo> there = ufs.Stat(to.resolved.key);
    if (there.ok()) return give_up(AlreadyExistsError(request.to + " exists"));
    if (there.status().code() != StatusCode::kNotFound) return give_up(there.status());
    condition = ufs::WriteCondition::Absent();
  } else {
    // Files of `to` waiting here that never went up say what the source holds there.
    std::optional<ufs::WriteCondition> known = write_back_->KnownSourceState(request.to);
    condition = known ? *known : ReplacedByRename(ufs, to.resolved.key);
  }
  // An older upload of `from` must not outlive the rename (the held file cannot be uploaded
  // meanwhile). First: if this fails, nothing changed. A new file never uploaded has nothing in
  // the source to delete (whatever is there now is someone else's, which the rename does not
  // own): the source is not asked, so the checkpoint idiom (write a temporary name, rename it)
  // works while the lake is down.
  if (!write_back_->NeverUploaded(request.from)) {
    bool source_failed = false;
    Status deleted = DeleteOldName(ufs, from.resolved.key, request.from, &source_failed);
    if (!deleted.ok()) return give_up(deleted.WithContext("rename of " + request.from));
    deleted_from = true;
  }
  StatusOr<WriteBack::PendingFile> moved =
      write_back_->Retarget(request.from, request.to, condition, holding, released);
  if (!moved.ok() && deleted_from) {
    write_back_->SetCondition(request.from, ufs::WriteCondition::Absent()).IgnoreError();
  }
  return moved;
}

Status WriteService::DeleteOldName(ufs::UnderStorage& ufs, const std::string& key,
                                   const std::string& path, bool* source_failed) {
  *source_failed = false;
  // In the journal only: here the files keep expecting what they do (they are held, so none
  // goes up meanwhile, and an open of the name during the delete continues from that).
  if (Status journaled = write_back_->JournalCondition(path, ufs::WriteCondition::None());
      !journaled.ok()) {
    if (Status back = write_back_->RejournalConditions(path); !back.ok()) {
      spdlog::error("write-back: {}: the journal did not take its condition back ({})", path,
                    back.ToString());
    }
    return journaled.WithContext("journal the rename");
  }
  CrashPoint("write-back-rename-deleting");
  Status deleted = ufs.Delete(key);
  CrashPoint("write-back-rename-deleted");
  if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) {
    // Whatever the error says, the delete may have gone through (a DELETE whose answer was
    // lost, then retries that failed otherwise): the source says.
    StatusOr<ufs::ObjectInfo> there = ufs.Stat(key);
    if (there.ok()) {
      *source_failed = true;
      if (Status back = write_back_->RejournalConditions(path); !back.ok()) {
        spdlog::error(
            "write-back: {}: the journal did not take its condition back after a failed "
            "delete ({}); after a crash its waiting files replace whatever the source holds",
            path, back.ToString());
      }
      return deleted;
    }
    if (there.status().code() != StatusCode::kNotFound) {
      // Nobody can say: its files replace whatever is there when they go up (right over the
      // old object and on its absence; an object someone else puts there meanwhile too).
      *source_failed = true;
      spdlog::warn(
          "write-back: {}: the delete of its older object failed ({}) and the source cannot "
          "say whether it happened ({}): its waiting files now replace whatever is there",
          path, deleted.ToString(), there.status().ToString());
      write_back_->SetCondition(path, ufs::WriteCondition::None()).IgnoreError();
      return deleted;
    }
    // Gone after all.
  }
  // Files of the name closed later go up on its absence (after a crash before this record,
  // blind: onto the absence all the same).
  write_back_->SetCondition(path, ufs::WriteCondition::Absent()).IgnoreError();
  return Status::Ok();
}

namespace {

// The errors of passing a file on after which it is uploaded here instead: the other worker
// could not take it now. Its refusals (the name exists for a no-replace rename, no write grant,
// a read-only mount there) are the rename's answer.
bool UploadInstead(const Status& why) {
  switch (why.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kResourceExhausted:
    case StatusCode::kIoError:
    case StatusCode::kCorruption:
    case StatusCode::kInternal:
    case StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

// Writes the first `size` bytes of the spool file `fd` of `path` through `handle` at `owner`:
// one block (at most 8 MiB, within one part of the digest's layout, `part_size`; 0: no
// digest) read while the previous one's pieces are on their way. Each part is hashed as it is
// read and the whole checked against the journaled digest before the last piece goes, so that
// a spool file damaged on disk after its close is never passed on (Corruption).
Status SendSpool(protocol::PageChannel& owner, uint64_t handle, int fd, uint64_t size,
                 uint64_t part_size, uint64_t digest, const std::string& path) {
  constexpr uint64_t kPiece = 1 << 20;
  // Read in blocks of at most 8 MiB that never cross a part of the digest's layout (parts
  // double in size every 1,000, up to GiBs: a part is hashed block by block).
  constexpr uint64_t kBlock = 8 << 20;
  static_assert(kBlock % write::kPartHashPiece == 0);
  std::optional<ufs::PartLayout> layout;
  if (part_size != 0) {
    StatusOr<ufs::PartLayout> made = ufs::PartLayout::Create(part_size);
    if (!made.ok()) return made.status().WithContext("the digest of the spool file of " + path);
    layout = *made;
  }
  struct Block {
    std::vector<char> bytes;
    std::vector<std::future<StatusOr<WriteReply>>> answers;
  };
  std::array<Block, 2> blocks;
  std::vector<uint64_t> part_hashes;
  write::PartHasher part;
  uint32_t part_index = 0;
  uint64_t part_end = layout ? std::min(size, layout->Size(0)) : size;
  Status first_error;
  auto settle = [&first_error](Block& block) {
    for (auto& answer : block.answers) {
      Status st = answer.get().status();
      if (!st.ok() && first_error.ok()) first_error = std::move(st);
    }
    block.answers.clear();
  };
  size_t index = 0;
  for (uint64_t offset = 0; offset < size; ++index) {
    Block& block = blocks[index % blocks.size()];
    settle(block);  // Its buffer is free again once its pieces are answered.
    if (!first_error.ok()) break;
    const uint64_t end = layout ? part_end : size;
    block.bytes.resize(static_cast<size_t>(std::min<uint64_t>(kBlock, end - offset)));
    first_error = ReadSealedSpool(fd, offset, block.bytes, path);
    if (!first_error.ok()) break;
    if (layout) {
      first_error = part.Update(block.bytes);
      if (!first_error.ok()) break;
      if (offset + block.bytes.size() == part_end) {  // The part is whole.
        part_hashes.push_back(part.Finish());
        part = write::PartHasher();
        if (part_end == size) {
          if (write::CombinePartHashes(part_hashes) != digest) {
            first_error = CorruptionError("the spool file of " + path +
                                          " no longer matches its digest: not passed on");
            break;
          }
        } else {
          ++part_index;
          if (part_index >= ufs::PartLayout::kMaxParts) {
            first_error = InvalidArgumentError("the spool file of " + path +
                                               " is larger than its part layout holds");
            break;
          }
          part_end = std::min(size, layout->Offset(part_index) + layout->Size(part_index));
        }
      }
    }
    for (uint64_t at = 0; at < block.bytes.size(); at += kPiece) {
      protocol::WritePageRequest write;
      write.handle = handle;
      write.offset = offset + at;
      write.data =
          std::span<const char>(block.bytes)
              .subspan(static_cast<size_t>(at),
                       static_cast<size_t>(std::min<uint64_t>(kPiece, block.bytes.size() - at)));
      write.checksums = ChunkChecksums(write.data);
      auto promise = std::make_shared<std::promise<StatusOr<WriteReply>>>();
      block.answers.push_back(promise->get_future());
      owner.CallWrite(
          write, [promise](StatusOr<WriteReply> reply) { promise->set_value(std::move(reply)); });
    }
    offset += block.bytes.size();
  }
  for (Block& block : blocks) settle(block);  // No piece in flight outlives its buffer.
  return first_error;
}

}  // namespace

StatusOr<WriteReply> WriteService::HandOver(const protocol::HandOverRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt from, ChangeablePath(request.from));
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt to, ChangeablePath(request.to));
  if (request.from == request.to) {
    return InvalidArgumentError("rename of " + request.from + " onto itself");
  }
  auto nothing_here = [&request] {
    return NotFoundError("no file of " + request.from +
                         " waits for its upload on this worker: rename it in the source");
  };
  if (write_back_ == nullptr || !write_back_->HasPending(request.from)) return nothing_here();
  if (from.resolved.mount != to.resolved.mount) {
    return UnimplementedError("rename from mount " + from.resolved.mount->spec.path + " to " +
                              to.resolved.mount->spec.path + ": a rename stays in one mount");
  }
  StatusOr<std::shared_ptr<protocol::PageChannel>> owner =
      options_.owner_of ? options_.owner_of(request.to)
                        : UnavailableError("this worker knows no other workers");
  if (owner.ok() && *owner == nullptr) {
    // This worker owns both names: the rename of decision 8.
    protocol::RenameRequest rename;
    rename.deadline_ms = request.deadline_ms;
    rename.from = request.from;
    rename.to = request.to;
    rename.no_replace = request.no_replace;
    return Rename(rename);
  }
  Status why = owner.status();
  // Files of `to` waiting here (its owner changed since they closed) must reach the source
  // before what is renamed onto `to`: both are uploaded, then the source renames.
  if (owner.ok() && write_back_->HasPending(request.to)) {
    why = FailedPreconditionError("files of " + request.to + " wait here too");
  } else if (owner.ok()) {
    bool source_failed = false;
    StatusOr<std::optional<WriteReply>> passed = PassOn(request, from, **owner, &source_failed);
    if (passed.ok() && *passed) return std::move(**passed);
    if (passed.ok()) return nothing_here();  // Uploaded meanwhile.
    // An upload instead would wait for the source that just failed (up to rename_wait).
    if (source_failed || !UploadInstead(passed.status())) return passed.status();
    why = passed.status();
  }
  spdlog::info("rename of {}: not passed to the owner of {} ({}); uploading it first", request.from,
               request.to, why.ToString());
  CAIRN_RETURN_IF_ERROR(write_back_->Sync(request.from, options_.rename_wait)
                            .WithContext("rename waits for the upload of " + request.from));
  CAIRN_RETURN_IF_ERROR(write_back_->Sync(request.to, options_.rename_wait)
                            .WithContext("rename waits for the upload of " + request.to));
  return nothing_here();
}

StatusOr<std::optional<WriteReply>> WriteService::PassOn(const protocol::HandOverRequest& request,
                                                         const PageService::PathAt& from,
                                                         protocol::PageChannel& owner,
                                                         bool* source_failed) {
  *source_failed = false;
  const auto deadline = std::chrono::steady_clock::now() + options_.rename_wait;
  bool holding = false;  // WriteBack::Hold's.
  for (;;) {
    std::optional<WriteBack::Latest> latest;
    {
      PathLocks::Held locked = commit_locks_.Lock(request.from);
      switch (write_back_->Hold(request.from, request.from, &holding)) {
        case WriteBack::HoldResult::kNothing:
          return std::optional<WriteReply>();
        case WriteBack::HoldResult::kBusy:
          break;
        case WriteBack::HoldResult::kHeld:
          // The newest file closed before the rename: the one passed on. (A close of `from`
          // while it is copied comes after the rename, and stays.)
          latest = write_back_->LatestFor(request.from);
          if (!latest) {
            write_back_->Unhold(request.from, request.from, &holding);
            return IoError("cannot open the spool file of " + request.from);
          }
          break;
      }
    }
    if (latest) {
      // Without the commit lock: the copy takes a while, and the owner of `to` may be passing
      // a file the other way, waiting for a lock of this worker.
      StatusOr<WriteReply> passed =
          PassHeld(request, from, owner, *latest, &holding, source_failed);
      if (!passed.ok()) return passed.status();
      return std::optional<WriteReply>(std::move(*passed));
    }
    if (!write_back_->WaitIdle(request.from, request.from, deadline)) {
      write_back_->Unhold(request.from, request.from, &holding);
      return DeadlineExceededError("rename of " + request.from + " waits for its upload");
    }
  }
}

StatusOr<WriteReply> WriteService::PassHeld(const protocol::HandOverRequest& request,
                                            const PageService::PathAt& from,
                                            protocol::PageChannel& owner,
                                            const WriteBack::Latest& latest, bool* holding,
                                            bool* source_failed) {
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{latest.fd};
  bool deleted_from = false;
  auto give_up = [&](Status why) {
    // The name is gone from the source: the files of `from` that stay go up on its absence
    // (their condition, the old object, would set them aside).
    if (deleted_from) {
      write_back_->SetCondition(request.from, ufs::WriteCondition::Absent()).IgnoreError();
    }
    write_back_->Unhold(request.from, request.from, holding);
    return why.WithContext("rename of " + request.from + " passed to " + owner.Describe());
  };
  protocol::OpenWriteRequest open;
  open.deadline_ms = request.deadline_ms;
  open.path = request.to;
  open.create = true;
  open.exclusive = request.no_replace;
  open.truncate = true;
  open.mode = protocol::WriteMode::kBack;
  StatusOr<WriteReply> opened = protocol::CallWriteAndWait(owner, open);
  if (!opened.ok()) return give_up(opened.status());
  const uint64_t handle = opened->handle;
  auto abort = [&](Status why) {
    owner.CallWrite(protocol::AbortWriteRequest{request.deadline_ms, handle},
                    [](StatusOr<WriteReply>) {});  // Else it goes at the owner's idle timeout.
    return give_up(std::move(why));
  };
  Status sent = SendSpool(owner, handle, latest.fd, latest.size, latest.digest_part_size,
                          latest.digest, request.from);
  if (!sent.ok()) return abort(std::move(sent));
  // The close under `from`'s commit lock, so that a remove or another rename of `from` made
  // during the copy is ordered before this one (then nothing appears under `to`) or after it.
  // (The owner of `to` takes no lock of this worker to close: no cycle.)
  PathLocks::Held commit = commit_locks_.Lock(request.from);
  if (!write_back_->IsPending(request.from, latest.id)) {
    return abort(NotFoundError(request.from + " was removed or renamed during the rename"));
  }
  // As a rename in one worker: an older upload of `from` must not outlive the rename. Deleted
  // only now, after the copy (a crash during it, seconds or minutes, changes nothing).
  if (!write_back_->NeverUploaded(request.from)) {
    Status deleted =
        DeleteOldName(*from.resolved.mount->ufs, from.resolved.key, request.from, source_failed);
    if (!deleted.ok()) return abort(deleted);
    deleted_from = true;
  }
  StatusOr<WriteReply> closed =
      protocol::CallWriteAndWait(owner, protocol::CloseWriteRequest{request.deadline_ms, handle});
  if (!closed.ok()) return abort(closed.status());
  // The owner of `to` holds the file (journaled there): it is no longer this worker's to upload.
  // A crash before this line leaves it here too: both names end in the source, as between the
  // copy and the delete of a rename on S3 (docs/consistency.md).
  CrashPoint("write-back-handed-over");
  // Passed on already: a journal that does not take it (logged) leaves the file to be
  // uploaded under `from` after a restart too, as a crash before this line would.
  write_back_->CancelPath(request.from, latest.id).IgnoreError();
  write_back_->Unhold(request.from, request.from, holding);
  metrics_->hand_overs->Increment();
  metrics_->renames->Increment();
  return closed;
}

StatusOr<std::shared_ptr<WriteService::OpenFile>> WriteService::Find(const std::string& principal,
                                                                     uint64_t handle) {
  MutexLock l(&open_mu_);
  auto it = open_.find(handle);
  if (it == open_.end() || it->second->principal != principal) {
    return NotFoundError("no file open for writing with this handle (closed, aborted after " +
                         std::to_string(options_.idle_timeout.count() / 1000) +
                         " s idle, or the worker restarted)");
  }
  return it->second;
}

StatusOr<std::string> WriteService::PathOf(const std::string& principal, uint64_t handle) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<OpenFile> file, Find(principal, handle));
  return file->path;
}

std::shared_ptr<WriteService::OpenFile> WriteService::Take(uint64_t handle) {
  MutexLock l(&open_mu_);
  auto it = open_.find(handle);
  if (it == open_.end()) return nullptr;
  std::shared_ptr<OpenFile> file = std::move(it->second);
  open_.erase(it);
  if (--open_by_principal_[file->principal] == 0) open_by_principal_.erase(file->principal);
  metrics_->open->Set(static_cast<double>(open_.size()));
  return file;
}

size_t WriteService::AbortIdle() {
  const int64_t cutoff = clock().NowMicros() - options_.idle_timeout.count() * 1000;
  std::vector<uint64_t> idle;
  {
    MutexLock l(&open_mu_);
    for (const auto& [handle, file] : open_) {
      if (file->busy.load() == 0 && file->last_used_us.load() < cutoff) idle.push_back(handle);
    }
  }
  size_t aborted = 0;
  for (uint64_t handle : idle) {
    std::shared_ptr<OpenFile> file = Take(handle);
    if (file == nullptr) continue;
    spdlog::info("aborting the write of {}: no request for {} s", file->path,
                 options_.idle_timeout.count() / 1000);
    metrics_->aborts->Increment();
    ++aborted;
    // Destroying the session aborts its upload and removes its spool file (once no request
    // that found it a moment ago still holds it).
  }
  return aborted;
}

void WriteService::ReapLoop() {
  const auto period = std::clamp(options_.idle_timeout / 4, std::chrono::milliseconds(10),
                                 std::chrono::milliseconds(30000));
  // At once, then every round until done: the uploads the last process left in its sources.
  AbortLeftoverUploads();
  MutexLock l(&open_mu_);
  while (!stopping_) {
    stop_cv_.WaitFor(&open_mu_, period, [this]() REQUIRES(open_mu_) { return stopping_; });
    if (stopping_) break;
    open_mu_.Unlock();
    AbortIdle();
    AbortLeftoverUploads();
    open_mu_.Lock();
  }
}

}  // namespace cairn::worker
