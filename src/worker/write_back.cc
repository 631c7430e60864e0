#include "worker/write_back.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <unordered_set>

#include "common/crash_point.h"

namespace cairn::worker {

using write::JournalRecord;

struct WriteBack::Metrics {
  explicit Metrics(metrics::Registry* r)
      : files(r->AddGauge("cairn_worker_write_back_pending_files",
                          "Closed files of write-back mounts not yet in their source")),
        bytes(r->AddGauge("cairn_worker_write_back_pending_bytes",
                          "Bytes of closed files of write-back mounts not yet in their source")),
        oldest(r->AddGauge("cairn_worker_write_back_oldest_pending_seconds",
                           "Age of the oldest closed file not yet in its source (0: none)")),
        failing(r->AddGauge("cairn_worker_write_back_failing_files",
                            "Pending files whose last upload attempt failed (being retried)")),
        commits(r->AddCounter("cairn_worker_write_back_commits_total",
                              "Write-back files committed to their source")),
        retries(r->AddCounter("cairn_worker_write_back_retries_total",
                              "Write-back commit attempts that failed and will be retried")),
        conflicts(r->AddCounter("cairn_worker_write_back_conflicts_total",
                                "Write-back files set aside: the source changed under them")),
        removed(r->AddCounter("cairn_worker_write_back_removed_total",
                              "Write-back files not uploaded: removed before their upload")),
        full_waits(r->AddCounter("cairn_worker_write_back_full_waits_total",
                                 "Closes that waited for room in the write-back budget")),
        full_refusals(r->AddCounter("cairn_worker_write_back_full_refusals_total",
                                    "Closes refused: no room came in time (ENOSPC)")),
        reserved(r->AddGauge("cairn_worker_write_back_open_bytes",
                             "Bytes of files of write-back mounts still open for writing")),
        write_refusals(r->AddCounter(
            "cairn_worker_write_back_write_refusals_total",
            "Writes refused for room in the write-back budget (the client sends them again)")) {}
  std::unique_ptr<metrics::Registry> owned;
  metrics::Gauge* files;
  metrics::Gauge* bytes;
  metrics::Gauge* oldest;
  metrics::Gauge* failing;
  metrics::Counter* commits;
  metrics::Counter* retries;
  metrics::Counter* conflicts;
  metrics::Counter* removed;
  metrics::Counter* full_waits;
  metrics::Counter* full_refusals;
  metrics::Gauge* reserved;
  metrics::Counter* write_refusals;
};

namespace {

uint64_t RandomEpoch() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

}  // namespace

bool PathUnder(const std::string& path, const std::string& prefix) {
  if (prefix.empty() || prefix == "/") return true;
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/' || prefix.back() == '/';
}

StatusOr<std::unique_ptr<WriteBack>> WriteBack::Open(WriteBackOptions options) {
  if (options.journal_path.empty()) return InvalidArgumentError("write-back needs a journal");
  if (options.threads < 1) return InvalidArgumentError("write-back needs at least one thread");
  if (options.max_pending_files < 1) {
    return InvalidArgumentError("write-back needs room for at least one waiting file");
  }
  if (options.retry_min.count() <= 0 || options.retry_max < options.retry_min) {
    return InvalidArgumentError("write-back retry backoff must be positive, min <= max");
  }
  std::vector<JournalRecord> replayed;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<write::WriteJournal> journal,
                         write::WriteJournal::Open(options.journal_path, &replayed));
  if (!replayed.empty()) {
    spdlog::info("write-back journal {}: {} closed file(s) still to upload", options.journal_path,
                 replayed.size());
  }
  return std::unique_ptr<WriteBack>(
      new WriteBack(std::move(options), std::move(journal), std::move(replayed)));
}

WriteBack::WriteBack(WriteBackOptions options, std::unique_ptr<write::WriteJournal> journal,
                     std::vector<JournalRecord> replayed)
    : options_(std::move(options)), journal_(std::move(journal)), epoch_(RandomEpoch()) {
  metrics::Registry* registry = options_.registry;
  std::unique_ptr<metrics::Registry> owned;
  if (registry == nullptr) {
    owned = std::make_unique<metrics::Registry>();
    registry = owned.get();
  }
  metrics_ = std::make_unique<Metrics>(registry);
  metrics_->owned = std::move(owned);
  MutexLock l(&mu_);
  next_id_ = journal_->max_id_at_open() + 1;
  for (JournalRecord& record : replayed) {
    next_id_ = std::max(next_id_, record.id + 1);
    if (record.type == JournalRecord::Type::kUpload) {
      leftover_uploads_.push_back(std::move(record));
      continue;
    }
    bytes_ += std::min(record.size, ~uint64_t{0} - bytes_);  // Sizes are capped; sums too.
    const uint64_t id = record.id;
    Item item;
    item.write.record = std::move(record);
    item.begun = item.may_have_landed = true;  // The run before may have uploaded it.
    items_.emplace(id, std::move(item));
  }
  UpdateGauges();
}

void WriteBack::Stop() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  changed_.NotifyAll();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

WriteBack::~WriteBack() {
  Stop();
  MutexLock l(&mu_);
  closed_ = true;
  if (!items_.empty()) {
    spdlog::info("write-back: {} file(s) ({} bytes) left in the journal for the next start",
                 items_.size(), bytes_);
  }
  if (!unjournaled_.empty()) {
    spdlog::warn(
        "write-back: {} file(s) whose end the journal did not take are replayed at the "
        "next start (and reported lost: their spool files are gone)",
        unjournaled_.size());
  }
  // The sessions' destructors abort their uploads and would remove their spool files: the
  // journal still needs those. Release the files from the sessions first.
  for (auto& [id, item] : items_) {
    if (item.write.session != nullptr) item.write.session->KeepSpoolFile();
  }
}

std::vector<std::string> WriteBack::SpoolFiles() const {
  MutexLock l(&mu_);
  std::vector<std::string> files;
  for (const auto& [id, item] : items_) files.push_back(item.write.record.spool_path);
  return files;
}

StatusOr<std::string> ChooseJournalPath(const std::vector<std::string>& spool_dirs) {
  if (spool_dirs.empty()) return InvalidArgumentError("no spool folder for the journal");
  const std::string first = spool_dirs.front() + "/journal";
  std::vector<std::string> live;  // Journals that still name files or uploads.
  for (const std::string& dir : spool_dirs) {
    const std::string journal = dir + "/journal";
    if (::access(journal.c_str(), F_OK) != 0) continue;
    std::vector<JournalRecord> records;
    StatusOr<std::unique_ptr<write::WriteJournal>> opened =
        write::WriteJournal::Open(journal, &records);
    // One that cannot be read may name files: it counts (opened for good, it says why).
    if (!opened.ok() || !records.empty()) live.push_back(journal);
  }
  if (live.size() > 1) {
    std::string names;
    for (const std::string& f : live) names += (names.empty() ? "" : ", ") + f;
    return FailedPreconditionError(
        "several write-back journals name files still waiting for upload (" + names +
        "): the worker cannot tell which is current; keep the current one and move the other "
        "away");
  }
  if (live.empty()) {
    // Journals without anything live are as good as none; but the one there is keeps its spool
    // set, the folders' stamps (a new journal would find the folders stamped by another, and
    // refuse spool files left by writes never closed: write/spool_folders.h).
    for (const std::string& dir : spool_dirs) {
      if (::access((dir + "/journal").c_str(), F_OK) == 0) return dir + "/journal";
    }
    return first;
  }
  if (live.front() != first) {
    spdlog::warn(
        "write-back: the journal is at {}, not in the first cache folder (the folders "
        "were given in another order); it stays there",
        live.front());
  }
  return live.front();
}

size_t WriteBack::RelocateSpoolFiles(const std::vector<std::string>& spool_dirs) {
  MutexLock l(&mu_);
  size_t found_count = 0;
  for (auto& [id, item] : items_) {
    std::string& path = item.write.record.spool_path;
    if (::access(path.c_str(), F_OK) == 0) continue;
    const std::string name = std::filesystem::path(path).filename().string();
    if (name.rfind("write-", 0) != 0) continue;  // Not a spool file's name (nor "..").
    std::vector<std::string> found;
    for (const std::string& dir : spool_dirs) {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), F_OK) == 0) found.push_back(std::move(candidate));
    }
    // None (its upload reports the loss) or several (which one is unknowable): left as it is.
    if (found.size() != 1) continue;
    spdlog::warn("write-back: the spool file of {} is no longer at {}; it was found at {}",
                 item.write.record.path, path, found.front());
    path = std::move(found.front());
    ++found_count;
  }
  return found_count;
}

void WriteBack::Start(CommitFn commit) {
  commit_ = std::move(commit);
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Loop(); });
}

Status WriteBack::Reserve(uint64_t held, uint64_t more) {
  MutexLock l(&mu_);
  if (more == 0) return Status::Ok();
  const uint64_t others = bytes_ + (reserved_ - std::min(reserved_, held));
  const uint64_t total = bytes_ + reserved_;
  const bool alone = others == 0 && items_.empty();
  if (!alone && (total > options_.max_pending_bytes || more > options_.max_pending_bytes - total)) {
    metrics_->write_refusals->Increment();
    return ResourceExhaustedError("the write-back budget is full (" + std::to_string(bytes_) +
                                  " bytes of " + std::to_string(items_.size()) +
                                  " closed file(s) wait for upload, " + std::to_string(reserved_) +
                                  " bytes are open for writing, the budget is " +
                                  std::to_string(options_.max_pending_bytes) + ")");
  }
  reserved_ += more;
  metrics_->reserved->Set(static_cast<double>(reserved_));
  return Status::Ok();
}

void WriteBack::Unreserve(uint64_t bytes) {
  {
    MutexLock l(&mu_);
    if (bytes == 0) return;
    reserved_ -= std::min(reserved_, bytes);
    metrics_->reserved->Set(static_cast<double>(reserved_));
    ++generation_;
  }
  changed_.NotifyAll();  // A close waiting for room.
}

uint64_t WriteBack::reserved_bytes() const {
  MutexLock l(&mu_);
  return reserved_;
}

bool WriteBack::HasRoomLocked(uint64_t size, uint64_t reserved) const {
  reserved = std::min(reserved, reserved_);
  // The file's own reservation counts as room for it: only what it grew past needs more.
  const uint64_t others = bytes_ + reserved_ - reserved;
  return stopping_ || (items_.empty() && others == 0) ||
         (others <= options_.max_pending_bytes && size <= options_.max_pending_bytes - others &&
          items_.size() < options_.max_pending_files);
}

bool WriteBack::WaitForRoom(uint64_t size, uint64_t reserved,
                            std::chrono::steady_clock::time_point deadline) {
  MutexLock l(&mu_);
  auto has_room = [&]() REQUIRES(mu_) { return HasRoomLocked(size, reserved); };
  if (has_room()) return true;
  metrics_->full_waits->Increment();
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left > std::chrono::steady_clock::duration::zero() &&
      changed_.WaitFor(&mu_,
                       std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                           std::chrono::milliseconds(1),
                       has_room)) {
    return true;
  }
  metrics_->full_refusals->Increment();
  return false;
}

Status WriteBack::RoomFor(uint64_t size, uint64_t reserved) const {
  MutexLock l(&mu_);
  return HasRoomLocked(size, reserved) ? Status::Ok() : NoRoomLocked();
}

Status WriteBack::NoRoomLocked() const {
  return ResourceExhaustedError(
      "the write-back budget is full (" + std::to_string(bytes_) + " bytes of " +
      std::to_string(items_.size()) + " file(s) wait for upload, at most " +
      std::to_string(options_.max_pending_bytes) + " bytes and " +
      std::to_string(options_.max_pending_files) +
      " files; the source is slow or unreachable): the file was not kept");
}

StatusOr<uint64_t> WriteBack::Add(PendingWrite& write, uint64_t reserved) {
  MutexLock l(&mu_);
  const uint64_t size = write.record.size;
  reserved = std::min(reserved, reserved_);
  // No wait here: the caller holds its file's lock, which the upload that would make room
  // needs (AdoptCommit); it waits in WaitForRoom without it.
  if (!HasRoomLocked(size, reserved)) return NoRoomLocked();
  if (stopping_) return UnavailableError("the worker is stopping");
  const uint64_t id = next_id_++;
  write.record.type = JournalRecord::Type::kPending;
  write.record.id = id;
  // The condition as of now: a commit of this path since the close updated the session.
  if (write.session != nullptr) write.record.condition = write.session->condition();
  CAIRN_RETURN_IF_ERROR(journal_->Append(write.record));
  CrashPoint("write-back-journaled");
  bytes_ += size;
  reserved_ -= std::min(reserved_, reserved);
  metrics_->reserved->Set(static_cast<double>(reserved_));
  Item item;
  item.write = std::move(write);
  // Not at once: a rename right after the close (a checkpoint saved under a temporary name)
  // then finds the file pending and moves it, instead of waiting for its upload.
  if (options_.commit_delay.count() > 0) {
    item.next_try_us = clock().NowMicros() + options_.commit_delay.count() * 1000;
  }
  items_.emplace(id, std::move(item));
  UpdateGauges();
  ++generation_;
  changed_.NotifyAll();
  return id;
}

Status WriteBack::CancelPath(const std::string& path, uint64_t through_id) {
  std::vector<std::unique_ptr<write::WriteSession>> gone;  // Destroyed after mu_ is released.
  Status first_error;
  MutexLock l(&mu_);
  std::vector<uint64_t> idle;
  for (auto& [id, item] : items_) {
    if (item.write.record.path != path || id > through_id) continue;
    item.cancelled = true;
    if (!item.running) {
      idle.push_back(id);
      continue;
    }
    // Picked by an upload thread: it uploads nothing now (its commit function asks Cancelled
    // under the commit lock the caller holds) but ends only when it returns. The removal is
    // journaled at once: a crash in between must not replay, and upload, a removed file.
    // (Finish journals the end again; a second end of an id is harmless.)
    JournalRecord removed;
    removed.type = JournalRecord::Type::kDone;
    removed.id = id;
    removed.outcome = JournalRecord::Outcome::kRemoved;
    removed.detail = "removed";
    Status journaled = journal_->Append(removed);
    if (!journaled.ok()) {
      spdlog::error("write-back: cannot journal the removal of {}: {}", path, journaled.ToString());
      if (first_error.ok()) first_error = journaled;
    }
  }
  for (uint64_t id : idle) {
    metrics_->removed->Increment();
    Status journaled;
    gone.push_back(Finish(id, JournalRecord::Outcome::kRemoved, "removed", &journaled));
    if (first_error.ok()) first_error = journaled;
  }
  if (first_error.ok()) return first_error;
  return IoError("the removal of the files of " + path +
                 " waiting for upload is not in the write-back journal (" + first_error.message() +
                 "): a restart now would upload them again");
}

void WriteBack::ChangeHoldsLocked(const std::string& from, const std::string& to, int by) {
  for (const std::string* name : {&from, &to}) {
    if (name == &to && to == from) break;
    int& holders = holds_[*name];
    holders += by;
    if (holders <= 0) holds_.erase(*name);
  }
}

WriteBack::HoldResult WriteBack::Hold(const std::string& from, const std::string& to,
                                      bool* holding) {
  MutexLock l(&mu_);
  bool pending = false;
  bool running = false;
  for (auto& [id, item] : items_) {
    const std::string& path = item.write.record.path;
    if (path != from && path != to) continue;
    pending = pending || (path == from && !item.cancelled);
    running = running || item.running;
  }
  if (!pending) {
    if (*holding) ChangeHoldsLocked(from, to, -1);
    *holding = false;
    ++generation_;  // A hold of an earlier round may have ended here.
    changed_.NotifyAll();
    return HoldResult::kNothing;
  }
  if (!*holding) ChangeHoldsLocked(from, to, +1);
  *holding = true;
  return running ? HoldResult::kBusy : HoldResult::kHeld;
}

bool WriteBack::WaitIdle(const std::string& from, const std::string& to,
                         std::chrono::steady_clock::time_point deadline) {
  MutexLock l(&mu_);
  auto idle = [&]() REQUIRES(mu_) {
    for (const auto& [id, item] : items_) {
      const std::string& path = item.write.record.path;
      if (item.running && (path == from || path == to)) return false;
    }
    return true;
  };
  const auto left = deadline - std::chrono::steady_clock::now();
  return changed_.WaitFor(&mu_,
                          std::chrono::duration_cast<std::chrono::microseconds>(
                              std::max(left, std::chrono::steady_clock::duration::zero())),
                          idle);
}

void WriteBack::Unhold(const std::string& from, const std::string& to, bool* holding) {
  MutexLock l(&mu_);
  if (!*holding) return;
  ChangeHoldsLocked(from, to, -1);
  *holding = false;
  ++generation_;
  changed_.NotifyAll();
}

StatusOr<WriteBack::PendingFile> WriteBack::Retarget(
    const std::string& from, const std::string& to, const ufs::WriteCondition& condition,
    bool* holding, std::vector<std::unique_ptr<write::WriteSession>>* released) {
  MutexLock l(&mu_);
  if (*holding) ChangeHoldsLocked(from, to, -1);
  *holding = false;
  Item* moved = nullptr;
  std::vector<uint64_t> replaced;  // Older files of `from`, and the files of `to`.
  bool running = false;
  for (auto& [id, item] : items_) {
    const std::string& path = item.write.record.path;
    if (path != from && path != to) continue;
    running = running || item.running;
    if (item.cancelled) continue;
    if (path == from) {
      if (moved != nullptr) replaced.push_back(moved->write.record.id);
      moved = &item;
    } else {
      replaced.push_back(id);
    }
  }
  ++generation_;
  changed_.NotifyAll();
  // Held files cannot start: only a caller that did not Hold (or did not wait) gets here.
  if (running) return FailedPreconditionError("rename of " + from + " while it is uploaded");
  if (moved == nullptr) return NotFoundError(from + " has no file waiting for upload");
  JournalRecord renamed;
  renamed.type = JournalRecord::Type::kRenamed;
  renamed.id = moved->write.record.id;
  renamed.path = to;
  renamed.condition = condition;
  CAIRN_RETURN_IF_ERROR(journal_->Append(renamed).WithContext("rename of " + from));
  JournalRecord& record = moved->write.record;
  record.path = to;
  record.condition = condition;
  // Its upload (parts sent while it was written) was to `from`'s key: the commit starts over
  // from the spool file, as after a restart.
  if (moved->write.session != nullptr) {
    moved->write.session->KeepSpoolFile();
    released->push_back(std::move(moved->write.session));
  }
  // A fresh start under the new name, after the commit delay (another rename may follow).
  moved->attempts = 0;
  // Nothing was uploaded to `to` for it (its uploads went to `from`).
  moved->begun = moved->may_have_landed = false;
  moved->next_try_us = clock().NowMicros() + options_.commit_delay.count() * 1000;
  PendingFile result{record.path, record.id, record.size, record.closed_at_ms};
  for (uint64_t id : replaced) {
    metrics_->removed->Increment();
    released->push_back(Finish(id, JournalRecord::Outcome::kRemoved, "replaced by a rename"));
  }
  return result;
}

void WriteBack::UploadBegun(const std::string& path, const std::string& token) {
  MutexLock l(&mu_);
  if (closed_ || uploads_.count(token) != 0) return;
  JournalRecord record;
  record.type = JournalRecord::Type::kUpload;
  record.id = next_id_++;
  record.path = path;
  record.detail = token;
  Status st = journal_->Append(record);
  if (!st.ok()) {
    spdlog::warn(
        "write-back journal: cannot note the upload of {} ({}); a crash would leave it "
        "to the bucket's lifecycle rule",
        path, st.ToString());
    return;
  }
  uploads_.emplace(token, record.id);
}

void WriteBack::UploadEnded(const std::string& token) {
  MutexLock l(&mu_);
  auto it = uploads_.find(token);
  if (closed_ || it == uploads_.end()) return;
  JournalRecord done;
  done.type = JournalRecord::Type::kDone;
  done.id = it->second;
  done.outcome = JournalRecord::Outcome::kEnded;
  // A failure leaves the record: the next start aborts an upload that is gone (harmless).
  (void)journal_->Append(done);
  uploads_.erase(it);
}

std::vector<JournalRecord> WriteBack::LeftoverUploads() const {
  MutexLock l(&mu_);
  return leftover_uploads_;
}

void WriteBack::LeftoverEnded(uint64_t id) {
  MutexLock l(&mu_);
  auto it = std::find_if(leftover_uploads_.begin(), leftover_uploads_.end(),
                         [id](const JournalRecord& r) { return r.id == id; });
  if (it == leftover_uploads_.end()) return;
  JournalRecord done;
  done.type = JournalRecord::Type::kDone;
  done.id = id;
  done.outcome = JournalRecord::Outcome::kEnded;
  if (journal_->Append(done).ok()) leftover_uploads_.erase(it);
}

bool WriteBack::Cancelled(uint64_t id) const {
  MutexLock l(&mu_);
  auto it = items_.find(id);
  return it != items_.end() && it->second.cancelled;
}

void WriteBack::AdoptCommit(const std::string& path, const std::string& version) {
  {
    MutexLock l(&mu_);
    for (auto& [id, item] : items_) {
      if (item.running && item.write.record.path == path) item.landed = true;
    }
  }
  // A journal that does not take it is reported there; the files expect the version here.
  SetCondition(path, ufs::WriteCondition::Version(version)).IgnoreError();
}

Status WriteBack::AppendConditionLocked(uint64_t id, const std::string& path,
                                        const ufs::WriteCondition& condition) {
  // A record of type 3 naming the same path: after a crash the file expects `condition`
  // (replayed with the condition it was closed with, its upload could find that gone and be
  // set aside).
  JournalRecord changed;
  changed.type = JournalRecord::Type::kRenamed;
  changed.id = id;
  changed.path = path;
  changed.condition = condition;
  Status journaled = journal_->Append(changed);
  if (!journaled.ok()) {
    spdlog::warn(
        "write-back: the journal did not take the condition of {} ({}): after a crash before "
        "its upload it may be set aside as a conflict",
        path, journaled.ToString());
  }
  return journaled;
}

template <typename Fn>
Status WriteBack::ForEachWaitingLocked(const std::string& path, Fn&& fn) {
  Status first = Status::Ok();
  for (auto& [id, item] : items_) {
    if (item.running || item.cancelled || item.write.record.path != path) continue;
    Status st = fn(id, item);
    if (first.ok()) first = std::move(st);
  }
  return first;
}

Status WriteBack::SetCondition(const std::string& path, const ufs::WriteCondition& condition) {
  MutexLock l(&mu_);
  return ForEachWaitingLocked(path, [&](uint64_t id, Item& item) REQUIRES(mu_) {
    // Journaled even when memory already holds it: JournalCondition may have journaled
    // another (a rename's "whatever is there" before its delete), and a replay reads the last.
    Status journaled = AppendConditionLocked(id, path, condition);
    item.write.record.condition = condition;
    if (item.write.session != nullptr) item.write.session->SetCondition(condition);
    return journaled;
  });
}

Status WriteBack::JournalCondition(const std::string& path, const ufs::WriteCondition& condition) {
  MutexLock l(&mu_);
  return ForEachWaitingLocked(path, [&](uint64_t id, Item&) REQUIRES(mu_) {
    return AppendConditionLocked(id, path, condition);
  });
}

Status WriteBack::RejournalConditions(const std::string& path) {
  MutexLock l(&mu_);
  return ForEachWaitingLocked(path, [&](uint64_t id, Item& item) REQUIRES(mu_) {
    return AppendConditionLocked(id, path, item.write.record.condition);
  });
}

Status WriteBack::Sync(const std::string& prefix, std::chrono::milliseconds timeout) {
  MutexLock l(&mu_);
  // Someone waits: files still in their commit delay go now.
  bool hurried = false;
  for (auto& [id, item] : items_) {
    if (item.attempts == 0 && item.next_try_us != 0 && PathUnder(item.write.record.path, prefix)) {
      item.next_try_us = 0;
      hurried = true;
    }
  }
  if (hurried) {
    ++generation_;
    changed_.NotifyAll();
  }
  auto waiting = [&]() REQUIRES(mu_) {
    size_t n = 0;
    for (const auto& [id, item] : items_) n += PathUnder(item.write.record.path, prefix) ? 1 : 0;
    return n;
  };
  if (changed_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return waiting() == 0; })) {
    return Status::Ok();
  }
  std::string why;
  for (const auto& [id, item] : items_) {
    if (PathUnder(item.write.record.path, prefix) && !item.last_error.empty()) {
      why = " (" + item.write.record.path + ": " + item.last_error + ")";
      break;
    }
  }
  return DeadlineExceededError(std::to_string(waiting()) + " file(s) under " + prefix +
                               " still wait for upload" + why);
}

bool WriteBack::HasPending(const std::string& path) const {
  MutexLock l(&mu_);
  return std::any_of(items_.begin(), items_.end(), [&](const auto& e) {
    return e.second.write.record.path == path && !e.second.cancelled;
  });
}

bool WriteBack::IsPending(const std::string& path, uint64_t id) const {
  MutexLock l(&mu_);
  auto it = items_.find(id);
  return it != items_.end() && it->second.write.record.path == path && !it->second.cancelled;
}

bool WriteBack::NeverUploaded(const std::string& path) const {
  MutexLock l(&mu_);
  bool any = false;
  for (const auto& [id, item] : items_) {
    if (item.write.record.path != path) continue;
    if (item.begun || item.write.record.condition.kind != ufs::WriteCondition::Kind::kAbsent) {
      return false;
    }
    any = true;
  }
  return any;
}

std::optional<ufs::WriteCondition> WriteBack::KnownSourceState(const std::string& path) const {
  MutexLock l(&mu_);
  std::optional<ufs::WriteCondition> oldest;
  for (const auto& [id, item] : items_) {  // In close order.
    if (item.write.record.path != path || item.cancelled || item.landed) continue;
    if (item.begun || item.running) return std::nullopt;
    if (!oldest) oldest = item.write.record.condition;
  }
  return oldest;
}

std::optional<ufs::WriteCondition> WriteBack::OldestCondition(const std::string& path) const {
  MutexLock l(&mu_);
  for (const auto& [id, item] : items_) {  // In close order.
    if (item.write.record.path == path && !item.cancelled && !item.landed) {
      return item.write.record.condition;
    }
  }
  return std::nullopt;
}

std::optional<WriteBack::Latest> WriteBack::LatestFor(const std::string& path) const {
  MutexLock l(&mu_);
  for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
    const JournalRecord& record = it->second.write.record;
    if (record.path != path || it->second.cancelled) continue;
    // Under mu_: the item (and so its spool file) cannot go while the file is opened.
    const int fd = ::open(record.spool_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    return Latest{record.id, record.size, fd, record.digest_part_size, record.digest};
  }
  return std::nullopt;
}

std::optional<WriteBack::PendingFile> WriteBack::PendingOf(const std::string& path) const {
  MutexLock l(&mu_);
  for (auto it = items_.rbegin(); it != items_.rend(); ++it) {
    const JournalRecord& record = it->second.write.record;
    if (record.path != path || it->second.cancelled) continue;
    return PendingFile{record.path, record.id, record.size, record.closed_at_ms};
  }
  return std::nullopt;
}

std::vector<WriteBack::PendingFile> WriteBack::PendingUnder(const std::string& dir) const {
  MutexLock l(&mu_);
  std::map<std::string_view, PendingFile> newest;
  for (const auto& [id, item] : items_) {  // Oldest first: a later file of a path replaces.
    const JournalRecord& record = item.write.record;
    if (item.cancelled || record.path == dir || !PathUnder(record.path, dir)) continue;
    newest[record.path] = PendingFile{record.path, record.id, record.size, record.closed_at_ms};
  }
  std::vector<PendingFile> files;
  files.reserve(newest.size());
  for (auto& [path, file] : newest) files.push_back(std::move(file));
  return files;
}

StatusOr<WriteBack::Opened> WriteBack::OpenPending(const std::string& path, uint64_t id) const {
  MutexLock l(&mu_);
  if (auto it = items_.find(id); it != items_.end()) {
    const JournalRecord& record = it->second.write.record;
    if (record.path != path || it->second.cancelled) {
      return NotFoundError(path + " has no such pending file");
    }
    // Under mu_: the item (and so its spool file) cannot go while the file is opened.
    const int fd = ::open(record.spool_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return IoError("cannot open the spool file of " + path + ": " + std::strerror(errno));
    return Opened{fd, record.size, ""};
  }
  if (auto it = recent_commits_.find(id); it != recent_commits_.end() && it->second.first == path) {
    return Opened{-1, 0, it->second.second};
  }
  return NotFoundError(path + " has no such pending file (uploaded, removed or set aside)");
}

WriteBackStats WriteBack::stats() const {
  MutexLock l(&mu_);
  WriteBackStats s;
  s.files = items_.size();
  s.bytes = bytes_;
  for (const auto& [id, item] : items_) {
    const int64_t closed = item.write.record.closed_at_ms;
    if (s.oldest_closed_at_ms == 0 || closed < s.oldest_closed_at_ms) {
      s.oldest_closed_at_ms = closed;
    }
    if (!item.last_error.empty()) {
      if (s.failing++ == 0) s.last_error = item.write.record.path + ": " + item.last_error;
    }
  }
  return s;
}

// O(1): called on every change. Ids follow the order of closing, so the first item is the
// oldest (a clock stepped back makes that approximate, never wrong by more than the step).
void WriteBack::UpdateGauges() {
  metrics_->files->Set(static_cast<double>(items_.size()));
  metrics_->bytes->Set(static_cast<double>(bytes_));
  const int64_t oldest = items_.empty() ? 0 : items_.begin()->second.write.record.closed_at_ms;
  const int64_t now_ms = clock().WallNanos() / 1'000'000;
  metrics_->oldest->Set(items_.empty() ? 0.0 : std::max<double>(0, (now_ms - oldest) / 1000.0));
  metrics_->failing->Set(static_cast<double>(failing_));
}

WriteBack::Item* WriteBack::NextReady(int64_t now_us, int64_t* wake_us) {
  std::unordered_set<std::string_view> blocked;  // Paths with an earlier file still waiting.
  for (auto& [id, item] : items_) {
    const bool behind = !blocked.insert(item.write.record.path).second;
    if (behind || item.running) continue;
    if (!holds_.empty() && holds_.count(item.write.record.path) != 0) continue;
    if (item.next_try_us > now_us) {
      *wake_us = std::min(*wake_us, item.next_try_us);
      continue;
    }
    return &item;
  }
  return nullptr;
}

std::unique_ptr<write::WriteSession> WriteBack::Finish(uint64_t id, JournalRecord::Outcome outcome,
                                                       const std::string& detail,
                                                       Status* journaled_out) {
  auto it = items_.find(id);
  if (it == items_.end()) return nullptr;
  JournalRecord done;
  done.type = JournalRecord::Type::kDone;
  done.id = id;
  done.outcome = outcome;
  done.detail = detail;
  Status journaled = journal_->Append(done);
  const std::string spool = it->second.write.record.spool_path;
  if (!journaled.ok()) {
    // The file is in its end state; only the journal does not know: the end is tried again
    // (a restart before that replays the file, whose spool file is gone: reported lost. Kept,
    // it could go up again over a later remove, rename or another writer's object).
    spdlog::error("write-back: cannot journal the end of {} (tried again): {}",
                  it->second.write.record.path, journaled.ToString());
    if (journaled_out != nullptr) *journaled_out = journaled;
    unjournaled_.push_back(done);
    unjournaled_retry_us_ = clock().NowMicros() + options_.retry_min.count() * 1000;
  }
  if (outcome == JournalRecord::Outcome::kCommitted) {
    recent_commits_[id] = {it->second.write.record.path, detail};
    recent_order_.push_back(id);
    if (recent_order_.size() > kRecentCommits) {
      recent_commits_.erase(recent_order_.front());
      recent_order_.pop_front();
    }
  }
  bytes_ -= std::min(bytes_, it->second.write.record.size);
  if (!it->second.last_error.empty()) --failing_;
  std::unique_ptr<write::WriteSession> session = std::move(it->second.write.session);
  items_.erase(it);
  UpdateGauges();
  ++generation_;
  changed_.NotifyAll();
  // A replayed file removed before its turn has no session to remove its spool file.
  if (session == nullptr && outcome != JournalRecord::Outcome::kConflict) ::unlink(spool.c_str());
  return session;  // The caller destroys it without mu_ (it may abort an upload).
}

void WriteBack::RetryUnjournaledLocked(int64_t now_us, int64_t* wake_us) {
  if (unjournaled_.empty()) return;
  if (now_us < unjournaled_retry_us_) {
    *wake_us = std::min(*wake_us, unjournaled_retry_us_);
    return;
  }
  size_t done = 0;
  for (; done < unjournaled_.size(); ++done) {
    const Status journaled = journal_->Append(unjournaled_[done]);
    if (journaled.code() == StatusCode::kIoError) break;  // The disk: tried again later.
    if (journaled.ok()) {
      spdlog::info("write-back: the end of file {} is journaled now", unjournaled_[done].id);
    } else {
      spdlog::error("write-back: the end of file {} is not journaled: {}", unjournaled_[done].id,
                    journaled.ToString());
    }
  }
  unjournaled_.erase(unjournaled_.begin(), unjournaled_.begin() + static_cast<ptrdiff_t>(done));
  if (!unjournaled_.empty()) {
    unjournaled_retry_us_ = now_us + options_.retry_max.count() * 1000;
    *wake_us = std::min(*wake_us, unjournaled_retry_us_);
  }
}

void WriteBack::Loop() {
  MutexLock l(&mu_);
  while (!stopping_) {
    const int64_t now = clock().NowMicros();
    int64_t wake = now + 1'000'000;  // The oldest-pending gauge moves on by itself.
    RetryUnjournaledLocked(now, &wake);
    Item* item = NextReady(now, &wake);
    if (item == nullptr) {
      UpdateGauges();
      const uint64_t seen = generation_;
      changed_.WaitFor(&mu_, std::chrono::microseconds(std::max<int64_t>(wake - now, 1000)),
                       [&]() REQUIRES(mu_) { return stopping_ || generation_ != seen; });
      continue;
    }
    const uint64_t id = item->write.record.id;
    item->running = true;
    item->begun = true;
    PendingWrite* write = &item->write;  // Stable: std::map, and only this thread erases it.
    mu_.Unlock();
    CommitResult result = commit_(*write);
    mu_.Lock();
    auto it = items_.find(id);
    if (it == items_.end()) continue;
    Item& done = it->second;
    done.running = false;
    std::unique_ptr<write::WriteSession> finished;
    switch (result.outcome) {
      case CommitResult::Outcome::kCommitted:
        metrics_->commits->Increment();
        finished = Finish(id, JournalRecord::Outcome::kCommitted, result.detail);
        break;
      case CommitResult::Outcome::kRemoved:
        metrics_->removed->Increment();
        finished = Finish(id, JournalRecord::Outcome::kRemoved, result.detail);
        break;
      case CommitResult::Outcome::kConflict:
        metrics_->conflicts->Increment();
        finished = Finish(id, JournalRecord::Outcome::kConflict, result.detail);
        break;
      case CommitResult::Outcome::kRetry: {
        metrics_->retries->Increment();
        ++done.attempts;
        const int shift = std::min(done.attempts - 1, 20);
        const int64_t backoff_us = std::min<int64_t>(options_.retry_min.count() * 1000 << shift,
                                                     options_.retry_max.count() * 1000);
        done.next_try_us = clock().NowMicros() + backoff_us;
        if (done.last_error.empty()) ++failing_;
        done.last_error = result.detail.empty() ? "failed" : result.detail;
        // An attempt that never reached the source (an outage) leaves the file as if it had
        // not run: a rename or remove of a new file still needs no source (NeverUploaded).
        done.may_have_landed = done.may_have_landed || result.may_have_landed;
        done.begun = done.may_have_landed;
        if (done.attempts == 1 || done.attempts % 10 == 0) {
          spdlog::warn("write-back: upload of {} failed (attempt {}; retried in {} ms): {}",
                       done.write.record.path, done.attempts, backoff_us / 1000, result.detail);
        }
        UpdateGauges();
        ++generation_;
        changed_.NotifyAll();
        break;
      }
    }
    if (finished != nullptr) {
      mu_.Unlock();
      finished.reset();
      mu_.Lock();
    }
  }
}

}  // namespace cairn::worker
