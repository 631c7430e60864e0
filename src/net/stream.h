// Byte streams between clients and workers. `Stream` is the seam where TLS plugs in: the
// worker and client code only see this interface; TcpStream is the plain-TCP implementation and
// src/tls wraps one in TLS.
//
// Thread-safety: one reader thread and one writer thread may use a Stream at the same time
// (reads and writes are independent); two concurrent writers must serialise themselves.
#ifndef CAIRN_NET_STREAM_H_
#define CAIRN_NET_STREAM_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace cairn::net {

class Stream {
 public:
  virtual ~Stream() = default;
  // Reads exactly out.size() bytes. Unavailable on EOF/reset ("connection closed"),
  // DeadlineExceeded if the receive timeout passes with no progress.
  virtual Status ReadFull(std::span<char> out) = 0;
  // Writes all bytes of each buffer in order (gathered: one syscall where possible).
  virtual Status WriteAll(std::span<const std::span<const char>> buffers) = 0;
  // Writes `head` (a frame header and its metadata, gathered), then `length` bytes of file `fd`
  // from `offset`, as one message: the file's bytes do not pass through user space where the
  // transport allows (sendfile for TCP), and a small message leaves in one piece (TCP: the head
  // is sent with MSG_MORE, so it shares a segment with the file's first bytes; TLS: head and
  // bytes share records and one send). A reader on the other side then wakes once per message,
  // not once for the head and again for the body. IoError if the file is shorter than `length`:
  // the peer got part of a message, and the stream must be closed.
  virtual Status SendFile(std::span<const std::span<const char>> head, int fd, uint64_t offset,
                          uint64_t length) = 0;
  // Timeout for each blocking read (0 = none).
  virtual void SetReadTimeout(std::chrono::milliseconds timeout) = 0;
  // Timeout for each blocking write or sendfile that makes no progress (0 = none): writes then
  // fail with DeadlineExceeded, and the stream must be closed (a frame may be half sent).
  virtual void SetWriteTimeout(std::chrono::milliseconds timeout) = 0;
  // Wakes any blocked reader/writer; later calls fail. Idempotent.
  virtual void Shutdown() = 0;
  virtual std::string PeerName() const = 0;
  // The socket under the stream, for layers that wrap it (TLS); -1 if there is none.
  virtual int NativeHandle() const { return -1; }
  // The identity the peer proved (the common name of its TLS client certificate); empty on a
  // plaintext stream or when the peer presented no certificate.
  virtual std::string PeerPrincipal() const { return {}; }
  // True when that certificate is a node certificate (extended key usage serverAuth, which
  // `cairn cert issue --node` sets and client certificates lack): the peer is a cluster member.
  virtual bool PeerIsClusterNode() const { return false; }
  // True when the bytes are encrypted and the peer authenticated (TLS).
  virtual bool Encrypted() const { return false; }
  // True when the peer runs on this machine (a loopback or one of this host's own addresses
  // on both ends, or a Unix socket): only such a peer may be told local file paths.
  virtual bool PeerOnThisHost() const { return false; }
};

// True for "localhost", 127.0.0.0/8 and ::1 (a listener there is not reachable from others).
bool IsLoopbackHost(std::string_view host);

// Splits "host:port" (IPv4 names or "[v6]:port"); InvalidArgument otherwise.
Status ParseHostPort(std::string_view text, std::string* host, uint16_t* port);

// Connects with a deadline; Unavailable ("connection refused", "timed out") on failure.
StatusOr<std::unique_ptr<Stream>> ConnectTcp(std::string_view host_port,
                                             std::chrono::milliseconds timeout);

// Two connected streams (a Unix socketpair): what one writes the other reads, with the same
// semantics as TCP (timeouts, Shutdown, SendFile). For tests of the code above the stream, which
// play the other end by hand. Unavailable if the pair cannot be made.
StatusOr<std::pair<std::unique_ptr<Stream>, std::unique_ptr<Stream>>> StreamPair();

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed): for
// tests and tools that must tell a server which fixed port to use. Unavailable if none.
StatusOr<uint16_t> PickFreeLoopbackPort();

// A listening TCP socket.
class Listener {
 public:
  // Binds host:port (port 0 = ephemeral). Unavailable/PermissionDenied with the reason.
  static StatusOr<std::unique_ptr<Listener>> Bind(const std::string& host, uint16_t port);
  ~Listener();
  uint16_t port() const { return port_; }
  // Blocks for the next connection; Unavailable once Shutdown() was called.
  StatusOr<std::unique_ptr<Stream>> Accept();
  void Shutdown();

 private:
  explicit Listener(int fd, uint16_t port) : fd_(fd), port_(port) {}
  int fd_;
  uint16_t port_;
};

}  // namespace cairn::net

#endif  // CAIRN_NET_STREAM_H_
