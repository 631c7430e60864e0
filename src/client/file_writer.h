// RemoteFileWriter: a FileWriter (include/cairn/client.h) over one worker's write handle
// (protocol v5, docs/write-path.md).
//
// Write copies the caller's bytes into requests of at most max_request_bytes and sends them at
// once; up to max_in_flight are outstanding, so the link stays busy while the caller goes on.
// A request that overlaps one in flight waits for it first (a channel spreads requests over
// several connections, so two in flight may land in either order). A write that failed for
// a reason worth retrying (the connection dropped, the data arrived damaged, the worker was
// slow) is sent again with backoff (250 ms doubling to 2 s: past the channel's 1 s of failing
// fast after a dropped connection), up to max_attempts sends, by the next call that waits for
// room or for the writes in flight. A write the worker has no room for (ResourceExhausted: its
// write-back budget is full of files still uploading, or its spool disk is) is sent again with
// backoff for up to room_wait (not counted as an attempt): the caller's write blocks
// meanwhile, and fails only when no room came (ENOSPC through FUSE); a truncate that grows the
// file waits the same way. Any other failure is kept and returned by every later call. The
// worker's NotFound for the handle (it restarted, or aborted the file after its idle timeout)
// is an I/O error of the open file (EIO through FUSE), not "no such file".
//
// A Write, Truncate or ReadAt issued while a Sync of this writer is in progress waits for it
// (the worker would hold it behind the upload, seconds to minutes, past the channel's timeout).
// Close stops the file taking writes before it drains the ones in flight and asks the worker
// to commit: a Write from another thread meanwhile fails (FailedPrecondition), and none can
// land after the close. A commit (Sync, and the sync a Close with changes sends before it lets
// the handle go) whose answer was lost is sent again: the worker answers it with the commit it
// made, so a file that landed is not reported failed because a connection dropped.
//
// Thread-safety: thread-safe. Lock order: mu_ only; no channel call is made with mu_ held (an
// in-process channel answers before CallWrite returns).
#ifndef CAIRN_CLIENT_FILE_WRITER_H_
#define CAIRN_CLIENT_FILE_WRITER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/client.h"
#include "client/room_wait.h"
#include "client/write_keeper.h"
#include "common/clock.h"
#include "common/thread_annotations.h"
#include "protocol/page_channel.h"

namespace cairn::client {

struct FileWriterOptions {
  uint32_t max_request_bytes = 1 << 20;  // Bytes per WritePage (<= protocol::kMaxWriteData).
  int max_in_flight = 8;
  int max_attempts = 5;  // Sends of a write failed for a reason worth retrying (see above).
  // How long a write the worker has no room for is sent again (backoff 20 ms doubling to
  // 1 s) before it fails.
  std::chrono::milliseconds room_wait{60'000};
  Clock* clock = nullptr;  // Not owned; null: Clock::Real().
  // How long Sync and Close may take: they upload what is left of the file to the source.
  std::chrono::milliseconds commit_timeout{15 * 60 * 1000};
  // Runs after a successful Sync or Close with what the worker replied (the client updates its
  // cached metadata of the path); not after a Close that follows a Sync with nothing written
  // in between.
  std::function<void(const std::string& path, const FileInfo& info)> on_commit;
  // Keeps the handle alive while the file stays open (the worker aborts it after idle_timeout,
  // OpenWrite's reply, without a request). Null or a timeout of 0: not kept.
  std::shared_ptr<WriteKeeper> keeper;
  std::chrono::milliseconds idle_timeout{0};
};

class RemoteFileWriter : public FileWriter {
 public:
  // A writer of the handle `handle` that `channel` opened for `path` (whose size is `size`).
  RemoteFileWriter(std::shared_ptr<protocol::PageChannel> channel, std::string path,
                   uint64_t handle, uint64_t size, FileWriterOptions options);
  ~RemoteFileWriter() override;

  const std::string& path() const override { return path_; }
  Status Write(uint64_t offset, std::span<const char> data) override EXCLUDES(mu_);
  Status Truncate(uint64_t size) override EXCLUDES(mu_);
  uint64_t size() const override EXCLUDES(mu_);
  StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out) override EXCLUDES(mu_);
  StatusOr<FileInfo> Sync() override EXCLUDES(mu_);
  StatusOr<FileInfo> Close() override EXCLUDES(mu_);
  Status Abort() override EXCLUDES(mu_);

 private:
  // One WritePage: its bytes (owned), sent, possibly again.
  struct Chunk {
    uint64_t offset = 0;
    std::vector<char> data;
    std::vector<uint64_t> checksums;
    int failures = 0;                   // Failures worth retrying (room refusals not counted).
    int64_t retry_at_us = 0;            // Not sent again before this.
    std::optional<RoomWait> room_wait;  // Set at its first refusal for room.
  };

  // Sends `chunk` once room and no overlap allow (and resends failed chunks meanwhile).
  Status Send(std::shared_ptr<Chunk> chunk) EXCLUDES(mu_);
  // Truncate and ReadAt: BeginCall waits until no Sync or Close of this writer is in progress,
  // then counts the call (a commit waits for it); EndCall ends it.
  Status BeginCall() EXCLUDES(mu_);
  void EndCall() EXCLUDES(mu_);
  Status TruncateCalled(uint64_t size) EXCLUDES(mu_);
  StatusOr<size_t> ReadAtCalled(uint64_t offset, std::span<char> out) EXCLUDES(mu_);
  void Dispatch(std::shared_ptr<Chunk> chunk) EXCLUDES(mu_);
  void Finished(const std::shared_ptr<Chunk>& chunk, const Status& status) EXCLUDES(mu_);
  // Waits until nothing is in flight (resending retryable failures); the first error. Sets
  // `*drained` (if given) to changes_ when nothing was in flight: the writes it counts landed.
  Status Drain(uint64_t* drained = nullptr) EXCLUDES(mu_);
  // Resends the retryable failures that are due (called with mu_ held; unlocks it around the
  // sends); when none is due yet, waits until the first is (or the file fails or is aborted).
  void ResendFailed() REQUIRES(mu_);
  // After a refusal for room: whether `chunk` is to be sent again (and when), or room_wait is
  // spent.
  bool BackOffForRoom(Chunk& chunk) const;
  Clock& clock() const { return options_.clock != nullptr ? *options_.clock : *Clock::Real(); }
  bool Overlaps(const Chunk& chunk) const REQUIRES(mu_);
  Status CheckOpen() const REQUIRES(mu_);
  // The file is closed or aborted: its handle needs no keeping any more.
  void StopKeeping();
  // One request with its reply, waited for; one the channel refused before sending it
  // (Status::not_sent) is sent again with backoff, up to max_attempts sends.
  StatusOr<protocol::WriteReply> CallRaw(const protocol::WriteRequest& request);
  // CallRaw, with a NotFound (the handle is gone) as an IoError.
  StatusOr<protocol::WriteReply> Call(const protocol::WriteRequest& request);
  // One SyncWrite, sent again (with backoff, up to max_attempts) when its answer was lost or
  // the worker was not reached.
  StatusOr<protocol::WriteReply> SendSync();
  StatusOr<FileInfo> Commit(bool close) EXCLUDES(mu_);
  // Commit's work once a close has stopped new writes.
  StatusOr<FileInfo> CommitDrained(bool close) EXCLUDES(mu_);

  const std::shared_ptr<protocol::PageChannel> channel_;
  const std::string path_;
  const uint64_t handle_;
  const FileWriterOptions options_;
  const std::shared_ptr<WriteKeeper::Kept> kept_;  // Null when not kept.

  mutable Mutex mu_;
  CondVar changed_;
  uint64_t size_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Chunk>> in_flight_ GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Chunk>> failed_ GUARDED_BY(mu_);  // To send again.
  Status error_ GUARDED_BY(mu_);  // Sticky: a write that cannot be retried failed.
  // Writes (counted when first sent) and truncates made, and how many of them the last successful
  // Sync or Close had seen. When a Close follows a commit with none made in between it changes
  // nothing in the source, and on_commit is not told again (the path may have been renamed or
  // removed since: FUSE's release comes after close(2) returned, and after what followed it).
  uint64_t changes_ GUARDED_BY(mu_) = 0;
  std::optional<uint64_t> committed_changes_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;  // A Close is draining or waits for its reply.
  // Syncs and Closes in progress: writes, truncates and reads issued meanwhile wait for them.
  int committing_ GUARDED_BY(mu_) = 0;
  int calls_ GUARDED_BY(mu_) = 0;  // Truncates and read-backs in progress (BeginCall).
  bool closed_ GUARDED_BY(mu_) = false;
  bool aborted_ GUARDED_BY(mu_) = false;
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_FILE_WRITER_H_
