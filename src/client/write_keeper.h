// WriteKeeper: keeps the write handles of files a client holds open alive at their workers.
//
// A worker aborts a file open for writing after its idle timeout without a request (3 minutes
// by default; OpenWrite's reply names it), so that a client that died does not hold the file's
// spool and room for ever. An application that holds a file open and writes to it now and then
// (a training log, a metrics file appended to once an epoch) would lose what it wrote at its
// next write. Each open RemoteFileWriter registers its handle here; one thread, started with the
// first, sends a KeepWrite (protocol v13) for every registered handle once a third of its
// timeout has passed since the last, whether the file was written meanwhile or not (one small
// request per file every few minutes). A KeepWrite that fails changes nothing here: the writer
// sees the lost handle at its next request.
//
// Thread-safety: thread-safe. Lock order: mu_ only; no channel call is made with mu_ held.
#ifndef CAIRN_CLIENT_WRITE_KEEPER_H_
#define CAIRN_CLIENT_WRITE_KEEPER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "protocol/page_channel.h"

namespace cairn::client {

struct WriteKeeperOptions {
  // When a handle is due and how often the thread looks (a fake clock in tests; the thread
  // still waits on real time).
  Clock* clock = Clock::Real();
  // How often the thread looks for handles due: at most this late.
  std::chrono::milliseconds tick{1000};
  // False: no thread; the caller runs KeepDue (tests).
  bool run_thread = true;
};

class WriteKeeper {
 public:
  explicit WriteKeeper(WriteKeeperOptions options = {});
  ~WriteKeeper();
  WriteKeeper(const WriteKeeper&) = delete;
  WriteKeeper& operator=(const WriteKeeper&) = delete;

  // One registered handle; pass it back to Forget.
  struct Kept;
  // Registers `handle`, opened through `channel` at a worker that aborts it after
  // `idle_timeout` without a request. Returns null (nothing to keep) for a timeout of 0 (a
  // worker that did not say).
  std::shared_ptr<Kept> Keep(std::shared_ptr<protocol::PageChannel> channel, uint64_t handle,
                             std::chrono::milliseconds idle_timeout) EXCLUDES(mu_);
  // Stops keeping it (the file was closed or aborted). Null is ignored.
  void Forget(const std::shared_ptr<Kept>& kept) EXCLUDES(mu_);

  // Sends KeepWrite for the handles due now; returns how many were sent. The thread calls it.
  size_t KeepDue() EXCLUDES(mu_);
  size_t kept() const EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);

  const WriteKeeperOptions options_;
  mutable Mutex mu_;
  CondVar wake_;
  std::vector<std::shared_ptr<Kept>> kept_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // Started with the first Keep.
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_WRITE_KEEPER_H_
