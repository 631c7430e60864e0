// LocalChannel: a PageChannel that calls an in-process PageService directly (cairn up), so the
// embedded client reads cached pages with one pread and no network hop or extra thread.
// Thread-safety: thread-safe; Call runs the request on the calling thread and calls `done`
// before returning.
#ifndef CAIRN_WORKER_LOCAL_CHANNEL_H_
#define CAIRN_WORKER_LOCAL_CHANNEL_H_

#include "protocol/page_channel.h"
#include "worker/page_service.h"

namespace cairn::worker {

class LocalChannel : public protocol::PageChannel {
 public:
  explicit LocalChannel(PageService* service) : service_(service) {}  // Not owned.
  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override;
  std::string Describe() const override { return "in-process worker"; }

 private:
  PageService* service_;
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_LOCAL_CHANNEL_H_
