#include "client/file_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/checksum.h"

namespace cairn::client {

namespace {

bool Retryable(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kCorruption;
}

// Before the send after the `failures`-th retryable failure: 250 ms doubling to 2 s. The
// channel fails requests at once for 1 s after a connection drops (suspect): sends in that
// time would spend the attempts without reaching the worker.
int64_t RetryBackoffMicros(int failures) {
  return std::min<int64_t>(2'000'000, int64_t{250'000} << std::min(failures - 1, 4));
}

// A request naming the handle answered NotFound: the worker no longer has the file open (it
// restarted, or aborted the file after its idle timeout). For the application that is an I/O
// error of its open file (EIO), not "no such file".
Status ForOpenFile(const Status& status) {
  if (status.code() != StatusCode::kNotFound) return status;
  return IoError("the worker no longer has the file open: " + status.message());
}

}  // namespace

RemoteFileWriter::RemoteFileWriter(std::shared_ptr<protocol::PageChannel> channel, std::string path,
                                   uint64_t handle, uint64_t size, FileWriterOptions options)
    : channel_(std::move(channel)),
      path_(std::move(path)),
      handle_(handle),
      options_(std::move(options)),
      kept_(options_.keeper != nullptr
                ? options_.keeper->Keep(channel_, handle_, options_.idle_timeout)
                : nullptr),
      size_(size) {}

RemoteFileWriter::~RemoteFileWriter() {
  bool open = false;
  {
    MutexLock l(&mu_);
    open = !closed_ && !aborted_;
  }
  if (open) {
    Status aborted = Abort();
    if (!aborted.ok()) spdlog::debug("abandoned write of {}: {}", path_, aborted.ToString());
  }
  StopKeeping();
  // No reply may arrive for a destroyed writer (its callbacks hold `this`).
  MutexLock l(&mu_);
  changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return in_flight_.empty(); });
}

void RemoteFileWriter::StopKeeping() {
  if (options_.keeper != nullptr) options_.keeper->Forget(kept_);
}

Status RemoteFileWriter::CheckOpen() const {
  if (closed_) return FailedPreconditionError(path_ + " is closed");
  if (closing_) return FailedPreconditionError(path_ + " is being closed");
  if (aborted_) return FailedPreconditionError("the write of " + path_ + " was aborted");
  return error_;
}

uint64_t RemoteFileWriter::size() const {
  MutexLock l(&mu_);
  return size_;
}

Status RemoteFileWriter::Write(uint64_t offset, std::span<const char> data) {
  if (data.empty()) return Status::Ok();
  if (offset > protocol::kMaxWriteOffset || data.size() > protocol::kMaxWriteOffset - offset) {
    return InvalidArgumentError("a write past " + std::to_string(protocol::kMaxWriteOffset) +
                                " bytes");
  }
  const size_t step =
      std::clamp<size_t>(options_.max_request_bytes, kChecksumChunkSize, protocol::kMaxWriteData);
  for (size_t done = 0; done < data.size();) {
    const size_t n = std::min(step, data.size() - done);
    auto chunk = std::make_shared<Chunk>();
    chunk->offset = offset + done;
    chunk->data.assign(data.begin() + static_cast<ptrdiff_t>(done),
                       data.begin() + static_cast<ptrdiff_t>(done + n));
    chunk->checksums = ChunkChecksums(chunk->data);
    CAIRN_RETURN_IF_ERROR(Send(std::move(chunk)));
    done += n;
  }
  return Status::Ok();
}

bool RemoteFileWriter::Overlaps(const Chunk& chunk) const {
  const uint64_t end = chunk.offset + chunk.data.size();
  return std::any_of(in_flight_.begin(), in_flight_.end(), [&](const auto& other) {
    return other->offset < end && chunk.offset < other->offset + other->data.size();
  });
}

Status RemoteFileWriter::BeginCall() {
  MutexLock l(&mu_);
  changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return committing_ == 0 || !CheckOpen().ok(); });
  CAIRN_RETURN_IF_ERROR(CheckOpen());
  ++calls_;
  return Status::Ok();
}

void RemoteFileWriter::EndCall() {
  MutexLock l(&mu_);
  --calls_;
  changed_.NotifyAll();  // Under mu_: see Finished.
}

Status RemoteFileWriter::Send(std::shared_ptr<Chunk> chunk) {
  {
    MutexLock l(&mu_);
    while (true) {
      CAIRN_RETURN_IF_ERROR(CheckOpen());
      if (committing_ > 0) {
        changed_.Wait(&mu_,
                      [this]() REQUIRES(mu_) { return committing_ == 0 || !CheckOpen().ok(); });
        continue;
      }
      if (!failed_.empty()) {
        ResendFailed();
        continue;
      }
      if (static_cast<int>(in_flight_.size()) < options_.max_in_flight && !Overlaps(*chunk)) {
        break;
      }
      // No room, or an overlap: wait for any reply.
      changed_.Wait(&mu_, [this, before = in_flight_.size()]() REQUIRES(mu_) {
        return in_flight_.size() < before || !failed_.empty() || !error_.ok() || aborted_;
      });
    }
    in_flight_.push_back(chunk);
    ++changes_;  // Counted once sent: a commit that drained before does not include it.
    size_ = std::max<uint64_t>(size_, chunk->offset + chunk->data.size());
  }
  Dispatch(std::move(chunk));
  return Status::Ok();
}

void RemoteFileWriter::Dispatch(std::shared_ptr<Chunk> chunk) {
  protocol::WritePageRequest request;
  request.handle = handle_;
  request.offset = chunk->offset;
  request.checksums = chunk->checksums;
  request.data = chunk->data;
  channel_->CallWrite(request, [this, chunk](StatusOr<protocol::WriteReply> reply) {
    Finished(chunk, reply.status());
  });
}

void RemoteFileWriter::Finished(const std::shared_ptr<Chunk>& chunk, const Status& status) {
  {
    MutexLock l(&mu_);
    in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), chunk));
    if (!status.ok()) {
      if (status.code() == StatusCode::kResourceExhausted && !aborted_ && BackOffForRoom(*chunk)) {
        failed_.push_back(chunk);
      } else if (status.code() == StatusCode::kResourceExhausted && error_.ok()) {
        error_ =
            status.WithContext("write of " + path_ + " at offset " + std::to_string(chunk->offset) +
                               (chunk->room_wait ? " (" + chunk->room_wait->GaveUp() + ")" : ""));
      } else if (Retryable(status.code()) && !aborted_ &&
                 chunk->failures + 1 < options_.max_attempts) {
        ++chunk->failures;
        chunk->retry_at_us = clock().NowMicros() + RetryBackoffMicros(chunk->failures);
        spdlog::debug("write of {} at {} failed ({}); sending it again", path_, chunk->offset,
                      status.ToString());
        failed_.push_back(chunk);
      } else if (error_.ok()) {
        error_ = ForOpenFile(status).WithContext("write of " + path_ + " at offset " +
                                                 std::to_string(chunk->offset));
      }
    }
    // Notified under mu_: once mu_ is released a waiter (Close, then the writer's owner) may
    // destroy this writer, condition variable included, so nothing here may touch it after.
    // (TSan caught the notify racing ~RemoteFileWriter when it came after the unlock.)
    changed_.NotifyAll();
  }
}

bool RemoteFileWriter::BackOffForRoom(Chunk& chunk) const {
  if (!chunk.room_wait) {
    chunk.room_wait.emplace(options_.room_wait);
    spdlog::info("no room for the write of {} on its worker; trying again for up to {}", path_,
                 RoomWait::Describe(options_.room_wait));
  }
  std::optional<int64_t> again = chunk.room_wait->Refused(clock().NowMicros());
  if (!again) return false;
  chunk.retry_at_us = *again;
  return true;
}

void RemoteFileWriter::ResendFailed() {
  const int64_t now = clock().NowMicros();
  std::deque<std::shared_ptr<Chunk>> again;
  std::deque<std::shared_ptr<Chunk>> later;
  int64_t first_due = INT64_MAX;
  for (auto& chunk : failed_) {
    if (chunk->retry_at_us <= now) {
      again.push_back(std::move(chunk));
    } else {
      first_due = std::min(first_due, chunk->retry_at_us);
      later.push_back(std::move(chunk));
    }
  }
  failed_.swap(later);
  if (again.empty()) {
    changed_.WaitFor(&mu_, std::chrono::microseconds(first_due - now),
                     [this]() REQUIRES(mu_) { return !error_.ok() || aborted_; });
    return;
  }
  for (auto& chunk : again) {
    if (chunk->room_wait) chunk->room_wait->Resending(now);
    in_flight_.push_back(chunk);
  }
  mu_.Unlock();
  for (auto& chunk : again) Dispatch(chunk);
  mu_.Lock();
}

Status RemoteFileWriter::Drain(uint64_t* drained) {
  MutexLock l(&mu_);
  while (true) {
    if (!failed_.empty()) {
      if (error_.ok()) {
        ResendFailed();
      } else {
        failed_.clear();  // The file is failed anyway.
      }
      continue;
    }
    if (in_flight_.empty()) {
      if (drained != nullptr) *drained = changes_;
      break;
    }
    changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return in_flight_.empty() || !failed_.empty(); });
  }
  return error_;
}

StatusOr<protocol::WriteReply> RemoteFileWriter::CallRaw(const protocol::WriteRequest& request) {
  for (int sent = 1;; ++sent) {
    StatusOr<protocol::WriteReply> reply = protocol::CallWriteAndWait(*channel_, request);
    // Never sent (the worker's channel refused it: suspect for a second after any request to
    // that worker missed its deadline, or no connection): sent again after a backoff past that
    // second, as writes are, or an fsync or close would fail for a neighbour's timeout.
    if (reply.ok() || !reply.status().not_sent() || sent >= options_.max_attempts) return reply;
    spdlog::debug("request for {} not sent ({}); sending it again", path_,
                  reply.status().ToString());
    clock().SleepForMicros(RetryBackoffMicros(sent));
  }
}

StatusOr<protocol::WriteReply> RemoteFileWriter::Call(const protocol::WriteRequest& request) {
  StatusOr<protocol::WriteReply> reply = CallRaw(request);
  if (!reply.ok()) return ForOpenFile(reply.status());
  return reply;
}

Status RemoteFileWriter::Truncate(uint64_t size) {
  if (size > protocol::kMaxWriteOffset) {
    return InvalidArgumentError("a size past " + std::to_string(protocol::kMaxWriteOffset));
  }
  CAIRN_RETURN_IF_ERROR(BeginCall());
  const Status truncated = TruncateCalled(size);
  EndCall();
  return truncated;
}

Status RemoteFileWriter::TruncateCalled(uint64_t size) {
  CAIRN_RETURN_IF_ERROR(Drain());  // Writes issued before must land before.
  {
    MutexLock l(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
  }
  protocol::TruncateWriteRequest request;
  request.handle = handle_;
  request.size = size;
  {
    MutexLock l(&mu_);
    ++changes_;
  }
  // A truncate that grows the file takes room on the worker, as a write does.
  RoomWait room_wait(options_.room_wait);
  for (;;) {
    StatusOr<protocol::WriteReply> reply = Call(request);
    if (reply.ok()) {
      MutexLock l(&mu_);
      size_ = reply->size;
      return Status::Ok();
    }
    if (reply.status().code() != StatusCode::kResourceExhausted) {
      return reply.status().WithContext("truncate of " + path_);
    }
    std::optional<int64_t> again = room_wait.Refused(clock().NowMicros());
    if (!again) {
      return reply.status().WithContext("truncate of " + path_ + " (" + room_wait.GaveUp() + ")");
    }
    clock().SleepForMicros(*again - clock().NowMicros());
  }
}

StatusOr<size_t> RemoteFileWriter::ReadAt(uint64_t offset, std::span<char> out) {
  CAIRN_RETURN_IF_ERROR(BeginCall());
  StatusOr<size_t> read = ReadAtCalled(offset, out);
  EndCall();
  return read;
}

StatusOr<size_t> RemoteFileWriter::ReadAtCalled(uint64_t offset, std::span<char> out) {
  CAIRN_RETURN_IF_ERROR(Drain());  // Writes issued before must be read back.
  {
    MutexLock l(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
  }
  size_t done = 0;
  while (done < out.size()) {
    protocol::ReadWrittenRequest request;
    request.handle = handle_;
    request.offset = offset + done;
    request.length =
        static_cast<uint32_t>(std::min<size_t>(out.size() - done, protocol::kMaxReadWritten));
    if (request.offset > protocol::kMaxWriteOffset) break;  // Past any file.
    StatusOr<protocol::WriteReply> reply = Call(request);
    if (!reply.ok()) return reply.status().WithContext("read of " + path_ + " (open for writing)");
    if (reply->data.size() > request.length) {
      return CorruptionError("worker sent " + std::to_string(reply->data.size()) +
                             " bytes for a read of " + std::to_string(request.length));
    }
    std::memcpy(out.data() + done, reply->data.data(), reply->data.size());
    done += reply->data.size();
    if (reply->data.size() < request.length) break;  // The end of the file.
  }
  return done;
}

StatusOr<FileInfo> RemoteFileWriter::Commit(bool close) {
  {
    MutexLock l(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
    if (close) closing_ = true;  // No write joins from here on: none can land after the close.
    ++committing_;
  }
  StatusOr<FileInfo> committed = CommitDrained(close);
  MutexLock l(&mu_);
  if (close && !committed.ok())
    closing_ = false;  // Not closed: writes, and another close, may follow.
  --committing_;
  changed_.NotifyAll();  // Under mu_: see Finished.
  return committed;
}

StatusOr<FileInfo> RemoteFileWriter::CommitDrained(bool close) {
  uint64_t seen = 0;  // The writes the commit includes: the ones that landed before it.
  CAIRN_RETURN_IF_ERROR(Drain(&seen));
  bool changes = true;
  {
    MutexLock l(&mu_);
    // A truncate or read-back begun before the commit ends first (none begins meanwhile).
    changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return calls_ == 0; });
    seen = changes_;
    // Aborted or closed by another thread meanwhile (or, for a sync, being closed).
    if (closed_ || aborted_ || (!close && closing_)) return CheckOpen();
    changes = committed_changes_ != seen;
  }
  // A close of a file with changes commits them with a sync first (a sync may be sent again,
  // a close may not: the worker lets the handle go at the first), then lets the handle go; a
  // close whose answer is lost after that sync is no error (the worker's idle timeout ends the
  // handle if the close never reached it).
  StatusOr<protocol::WriteReply> reply = InternalError("not sent");
  if (!close || changes) reply = SendSync();
  if (close && (reply.ok() || !changes)) {
    const auto deadline_ms = static_cast<uint32_t>(options_.commit_timeout.count());
    StatusOr<protocol::WriteReply> closed = Call(protocol::CloseWriteRequest{deadline_ms, handle_});
    if (closed.ok() || !reply.ok()) {
      reply = std::move(closed);
    } else {
      spdlog::debug("close of {} after its commit: {}", path_, closed.status().ToString());
    }
  }
  if (!reply.ok()) return reply.status().WithContext((close ? "close of " : "sync of ") + path_);
  {
    MutexLock l(&mu_);
    if (close) closed_ = true;
    // The size the commit saw (nothing is sent during a commit, but be safe).
    if (changes_ == seen) size_ = reply->size;
    committed_changes_ = seen;
  }
  if (close) StopKeeping();
  FileInfo info;
  const size_t slash = path_.rfind('/');
  info.name = path_.substr(slash + 1);
  info.size = reply->size;
  info.version = reply->version;
  info.mtime_ns = reply->mtime_ns;
  if (options_.on_commit && changes) options_.on_commit(path_, info);
  return info;
}

StatusOr<protocol::WriteReply> RemoteFileWriter::SendSync() {
  const auto deadline_ms = static_cast<uint32_t>(options_.commit_timeout.count());
  for (int sent = 1;; ++sent) {
    StatusOr<protocol::WriteReply> reply = Call(protocol::SyncWriteRequest{deadline_ms, handle_});
    // Only a lost answer (the connection dropped under the commit, which the worker finishes,
    // or no answer in time): the worker answers a sync of a file committed since with that
    // commit, and waits for one still running. Its own answers, a failed commit included,
    // are final.
    if (reply.ok() || !reply.status().outcome_unknown() || sent >= options_.max_attempts) {
      return reply;
    }
    spdlog::debug("sync of {} failed ({}); sending it again", path_, reply.status().ToString());
    clock().SleepForMicros(RetryBackoffMicros(sent));
  }
}

StatusOr<FileInfo> RemoteFileWriter::Sync() { return Commit(false); }
StatusOr<FileInfo> RemoteFileWriter::Close() { return Commit(true); }

Status RemoteFileWriter::Abort() {
  {
    MutexLock l(&mu_);
    if (aborted_ || closed_) return Status::Ok();
    aborted_ = true;  // Failed writes are not sent again from here on.
    failed_.clear();
    changed_.Wait(&mu_, [this]() REQUIRES(mu_) { return in_flight_.empty(); });
  }
  changed_.NotifyAll();
  StopKeeping();
  StatusOr<protocol::WriteReply> reply = CallRaw(
      protocol::AbortWriteRequest{static_cast<uint32_t>(options_.commit_timeout.count()), handle_});
  if (!reply.ok() && reply.status().code() != StatusCode::kNotFound) {  // Gone already: fine.
    return reply.status().WithContext("abort of " + path_);
  }
  return Status::Ok();
}

}  // namespace cairn::client
