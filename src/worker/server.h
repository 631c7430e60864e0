// WorkerServer: serves the Cairn worker protocol (docs/protocol.md) over TCP.
//
// One reader thread per connection decodes frames; requests for cached pages are answered inline
// (microseconds), misses go to a thread pool so one slow UFS fetch does not hold up the
// pipelined requests behind it. Replies may leave in a different order than requests arrived
// (they carry the request id). Cached bytes leave through sendfile from the page file.
// A malformed or truncated frame closes its connection with a logged reason; nothing else is
// affected.
//
// Thread-safety: Start/Stop from one thread; everything else is internal.
#ifndef CAIRN_WORKER_SERVER_H_
#define CAIRN_WORKER_SERVER_H_

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "common/thread_annotations.h"
#include "common/thread_pool.h"
#include "net/stream.h"
#include "worker/page_service.h"

namespace cairn::worker {

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 7070;  // 0 = ephemeral (tests).
  int miss_threads = 32;  // Concurrent UFS fetches across all connections.
};

class WorkerServer {
 public:
  // `service` is not owned and must outlive the server. Unavailable if the port is taken.
  static StatusOr<std::unique_ptr<WorkerServer>> Start(PageService* service,
                                                       const ServerOptions& options);
  ~WorkerServer();
  uint16_t port() const { return listener_->port(); }
  // Stops accepting, closes every connection and joins all threads. Idempotent.
  void Stop();

 private:
  class Connection;
  WorkerServer(PageService* service, std::unique_ptr<net::Listener> listener, int miss_threads);
  void AcceptLoop();
  void ReapFinished() REQUIRES(mu_);

  PageService* service_;
  std::unique_ptr<net::Listener> listener_;
  std::unique_ptr<ThreadPool> miss_pool_;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  Mutex mu_;
  std::list<std::shared_ptr<Connection>> connections_ GUARDED_BY(mu_);
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_SERVER_H_
