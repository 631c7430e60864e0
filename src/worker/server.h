// WorkerServer: serves the Cairn worker protocol (docs/protocol.md) over TCP.
//
// I/O model (docs/protocol.md "Server limits"): each connection has a reader thread and a
// writer thread. The reader decodes frames and answers requests for cached pages inline
// (microseconds; the bytes leave through sendfile from the page file). Everything else (misses,
// loads, peer fills) goes to a pool of miss threads shared by all connections and scheduled
// fairly (connections take turns), and its reply is queued for the connection's writer, so a
// miss thread never blocks on a client's socket. Replies may leave in any order (they carry the
// request id).
//
// Limits that keep one client from hurting the others:
// - a connection has at most `max_outstanding_per_connection` requests accepted but not yet
//   answered; at that bound its reader stops reading (TCP pushes back on the client), so queues
//   and the memory held by queued replies are bounded;
// - a reply that makes no progress for `send_timeout` (the client stopped reading) closes the
//   connection;
// - a connection that sends no request within `handshake_timeout`, or none for
//   `idle_timeout`, is closed (clients reconnect when they need to);
// - at most `max_connections` connections: past it, the oldest connection that has not sent a
//   request yet is closed to make room, and if there is none the new one is refused;
// - a request naming a mount this worker does not know yet (it may wait for the mount table)
//   waits on its own small pool, never on a miss thread;
// - a WritePage frame may carry up to protocol::kMaxWriteData bytes (other requests 64 KiB); it
//   is checked and written to the spool file by the reader (local disk only), unless its file
//   is in a long operation (a commit uploading it): then a copy waits off the reader
//   (WriteService::ServeNow), at most 32 MiB of copies per connection, past which the reader
//   waits. Requests that talk to the source (open, sync, close, abort, remove) run on the miss
//   threads.
// A malformed or truncated frame closes its connection with a logged reason; nothing else is
// affected.
//
// Thread-safety: Start/Stop from one thread; Stats from any thread.
#ifndef CAIRN_WORKER_SERVER_H_
#define CAIRN_WORKER_SERVER_H_

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "common/fair_pool.h"
#include "common/thread_annotations.h"
#include "metrics/registry.h"
#include "net/stream.h"
#include "tls/tls_context.h"
#include "worker/metadata_service.h"
#include "worker/page_service.h"
#include "worker/request_authorizer.h"
#include "worker/write_service.h"

namespace cairn::worker {

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 7070;        // 0 = ephemeral (tests).
  int miss_threads = 32;       // Concurrent UFS fetches across all connections.
  int mount_wait_threads = 4;  // Requests waiting for a mount this worker has not seen yet.
  int max_connections = 1024;
  int max_outstanding_per_connection = 64;
  std::chrono::milliseconds send_timeout{10000};
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds idle_timeout{300000};
  // TLS (docs/security.md): set, every connection must complete a TLS handshake (mutual TLS
  // when the context requires client certificates) before its first frame is read; a
  // plaintext client is told so in a kVersionMismatch frame and closed.
  std::shared_ptr<tls::TlsContext> tls;
  // Checks every request against the cluster's authorization policy and verifies Hello tokens
  // (docs/security.md). Not owned; null: every request is allowed and tokens are refused.
  RequestAuthorizer* authorizer = nullptr;
  // Answers the write requests (protocol v5). Not owned; null: they are answered
  // FailedPrecondition (this worker takes no writes).
  WriteService* writes = nullptr;
  // Server metrics (connections, refusals, timeouts) go here when set. Not owned.
  metrics::Registry* registry = nullptr;
  // Times requests against their deadlines (a request that waited for a miss thread past its
  // deadline_ms is answered DeadlineExceeded, not served). Not owned; null: Clock::Real().
  Clock* clock = nullptr;
};

struct ServerStats {
  uint64_t connections = 0;      // Open now.
  uint64_t accepted = 0;         // Since start.
  uint64_t refused = 0;          // Over the connection cap.
  uint64_t timed_out = 0;        // Closed for a send, handshake or idle timeout.
  uint64_t tls_refused = 0;      // Closed for a failed TLS handshake or a plaintext client.
  uint64_t queued_requests = 0;  // Waiting for a miss or mount-wait thread now.
  // Bytes of writes waiting off the connections' readers for their file's commit now.
  uint64_t parked_write_bytes = 0;
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
  ServerStats Stats() EXCLUDES(mu_);

 private:
  class Connection;
  struct Counters;
  WorkerServer(PageService* service, std::unique_ptr<net::Listener> listener,
               const ServerOptions& options);
  void AcceptLoop();
  void Admit(std::unique_ptr<net::Stream> stream) EXCLUDES(mu_);
  void ReapFinished() REQUIRES(mu_);

  PageService* service_;
  MetadataService metadata_{service_};
  const ServerOptions options_;
  std::unique_ptr<net::Listener> listener_;
  std::unique_ptr<Counters> counters_;
  std::unique_ptr<FairPool> miss_pool_;
  std::unique_ptr<FairPool> mount_wait_pool_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_connection_id_{1};
  std::thread accept_thread_;
  Mutex mu_;
  std::list<std::shared_ptr<Connection>> connections_ GUARDED_BY(mu_);
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_SERVER_H_
