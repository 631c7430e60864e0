// LocalChannel: a PageChannel that calls an in-process PageService directly (cairn up), so the
// embedded client reads cached pages with one pread and no network hop or extra thread.
// Thread-safety: thread-safe. Call, CallMetadata and every write request but WritePage run on
// the calling thread and call `done` before returning. WritePage requests run on the channel's
// own small pool when it has one (`write_threads` > 0): the caller (a FUSE thread) returns once
// the bytes are queued, as it does with a remote worker, and copies the next write while this
// one goes to the spool. On 2 cores that overlaps the writer's syscall with the spool's pwrite
// (docs/benchmarks.md, "Write-back writes pipelined"). At most kMaxQueuedWrites wait; past that a
// WritePage runs on the caller's thread, so a fast writer is slowed, not buffered without bound.
#ifndef CAIRN_WORKER_LOCAL_CHANNEL_H_
#define CAIRN_WORKER_LOCAL_CHANNEL_H_

#include <memory>

#include "common/thread_pool.h"
#include "protocol/page_channel.h"
#include "worker/metadata_service.h"
#include "worker/page_service.h"
#include "worker/write_service.h"

namespace cairn::worker {

class LocalChannel : public protocol::PageChannel {
 public:
  static constexpr size_t kMaxQueuedWrites = 32;

  // Not owned; `writes` may be null (writes are then refused). Both outlive the channel.
  explicit LocalChannel(PageService* service, WriteService* writes = nullptr,
                        int write_threads = 0);
  // Runs the WritePage requests still queued, then returns.
  ~LocalChannel() override;
  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override;
  // Write requests go straight to the write service as the local (anonymous) principal: the
  // embedded worker of `cairn up` serves only its own process.
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override;
  // Stat and list through the worker (write-back mounts: files not yet uploaded show), with
  // everything visible: the embedded worker serves only its own process.
  void CallMetadata(const protocol::MetadataRequest& request, MetadataCallback done) override;
  std::string Describe() const override { return "in-process worker"; }

 private:
  PageService* service_;
  WriteService* writes_;
  MetadataService metadata_{service_};
  std::unique_ptr<ThreadPool> write_pool_;  // Null: WritePage runs on the caller's thread.
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_LOCAL_CHANNEL_H_
