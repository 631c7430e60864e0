// RemoteChannel: a PageChannel to one worker over TCP, with pipelining.
//
// Requests are spread over a few persistent connections; each connection has one reader thread
// that matches replies to requests by id, so many requests are in flight at once and replies
// may come back in any order. Every request has a deadline: a sweeper fails late requests with
// DeadlineExceeded. A connection failure fails every request on it with Unavailable and marks
// the worker suspect, so further requests fail fast (no connect timeout per read) until a
// reconnect succeeds after `suspect_backoff`. A request that was being sent or waited for its
// reply fails marked Status::outcome_unknown() (the worker may have acted on it); one that
// found no connection (refused, suspect) fails unmarked: it never left this process.
//
// Thread-safety: thread-safe. Callbacks run on internal threads and must not block for long.
#ifndef CAIRN_TRANSPORT_REMOTE_CHANNEL_H_
#define CAIRN_TRANSPORT_REMOTE_CHANNEL_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "net/stream.h"
#include "protocol/page_channel.h"

namespace cairn::transport {

struct RemoteChannelOptions {
  std::string address;  // "host:port"
  int connections = 4;
  uint32_t page_size = 1 << 20;  // Checked against the worker's Hello reply.
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds suspect_backoff{1000};
  // A connection with nothing in flight for this long is closed by the client (and reopened
  // on the next request). Shorter than the worker's idle timeout (5 min), so the worker never
  // closes a connection just as a request is sent on it.
  std::chrono::milliseconds idle_close{60000};
  // A signed token (auth/token.h) presented in Hello: the worker then authorizes this
  // channel's requests as the token's principal. Sent only over TLS or to a worker on this
  // machine (a bearer credential in the clear could be replayed); FailedPrecondition otherwise.
  std::string token;
  // Read cached pages straight from the worker's files when it shares this machine.
  bool short_circuit = true;
  // The time source of deadlines, suspect periods and idle closes (a FakeClock in tests). Not
  // owned. The sweeper still wakes on real time (every request_timeout / 20, at least 5 ms).
  Clock* clock = Clock::Real();
  // Opens a stream to `address` (tests: one end of net::StreamPair()); empty = TCP.
  std::function<StatusOr<std::unique_ptr<net::Stream>>(const std::string& address,
                                                       std::chrono::milliseconds timeout)>
      connect;
};

class RemoteChannel : public protocol::PageChannel {
 public:
  explicit RemoteChannel(RemoteChannelOptions options);
  ~RemoteChannel() override;

  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override;
  void CallMetadata(const protocol::MetadataRequest& request, MetadataCallback done) override;
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override;
  std::string Describe() const override { return options_.address; }
  std::shared_ptr<const std::vector<std::string>> ShortCircuitDirs() override;

  // True while the worker is considered unreachable (requests fail fast).
  bool suspect() const;

 private:
  class Conn;
  // A live connection, or null with the reason the new one failed in `*why`.
  // A connection, or null with the reason in `why`.
  std::shared_ptr<Conn> GetConnection(Status* why) EXCLUDES(mu_);
  // The worker's refusal of this client's credential (PermissionDenied), while the channel is
  // suspect because of it; OK otherwise.
  Status Refusal() EXCLUDES(mu_);
  void MarkSuspect();
  // The worker's cache folders if this process sees the same INSTANCE tokens in them.
  std::shared_ptr<const std::vector<std::string>> CheckShortCircuit(
      const protocol::HelloReply& hello);
  void SweepLoop();
  // A request waiting for its reply: page and control requests complete `done`, metadata
  // requests `metadata_done`, write requests `write_done`.
  struct Pending {
    enum class Kind { kPage, kMetadata, kWrite };
    std::span<char> dest;
    Callback done;
    MetadataCallback metadata_done;
    WriteCallback write_done;
    int64_t deadline_us = 0;
    Kind kind() const {
      return metadata_done ? Kind::kMetadata : write_done ? Kind::kWrite : Kind::kPage;
    }
    void Fail(Status why);
  };
  // Sends one encoded request with `deadline_ms` over a connection, replacing a connection
  // closed a moment ago once; else fails `pending` (Unavailable, or the worker's refusal of
  // this client's credential). `extra` follows `payload` in the frame (a WritePage's data).
  void Send(protocol::MessageType type, const std::string& payload, uint32_t deadline_ms,
            Pending pending, std::span<const char> extra = {});

  RemoteChannelOptions options_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> round_robin_{0};
  Status refusal_ GUARDED_BY(mu_);
  std::atomic<int64_t> suspect_until_us_{0};
  std::atomic<bool> handshaken_{false};
  std::atomic<bool> short_circuit_logged_{false};  // A Hello reply was received at least once.
  mutable Mutex mu_;
  std::vector<std::shared_ptr<Conn>> conns_ GUARDED_BY(mu_);
  std::shared_ptr<const std::vector<std::string>> short_circuit_dirs_ GUARDED_BY(mu_);
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread sweeper_;
};

}  // namespace cairn::transport

#endif  // CAIRN_TRANSPORT_REMOTE_CHANNEL_H_
