// LocalChannel: a PageChannel that calls an in-process PageService directly (cairn up), so the
// embedded client reads cached pages with one pread and no network hop or extra thread.
// Thread-safety: thread-safe; Call runs the request on the calling thread and calls `done`
// before returning.
#ifndef CAIRN_WORKER_LOCAL_CHANNEL_H_
#define CAIRN_WORKER_LOCAL_CHANNEL_H_

#include "protocol/page_channel.h"
#include "worker/metadata_service.h"
#include "worker/page_service.h"
#include "worker/write_service.h"

namespace cairn::worker {

class LocalChannel : public protocol::PageChannel {
 public:
  // Not owned; `writes` may be null (writes are then refused).
  explicit LocalChannel(PageService* service, WriteService* writes = nullptr)
      : service_(service), writes_(writes) {}
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
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_LOCAL_CHANNEL_H_
