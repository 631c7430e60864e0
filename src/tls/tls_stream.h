// Internal to src/tls: a net::Stream that runs TLS over a connected socket (see tls_context.h
// for the contract users see).
//
// Concurrency: OpenSSL forbids two threads in one SSL object, while net::Stream allows a reader
// and a writer at once. The socket is non-blocking and every SSL call is made under `mu_`, which
// is never held while waiting: a call that needs the socket returns WANT_READ/WANT_WRITE, the
// lock is dropped, and the thread waits in poll() for the socket with its own timeout.
#ifndef CAIRN_TLS_TLS_STREAM_H_
#define CAIRN_TLS_TLS_STREAM_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "net/stream.h"
#include "tls/openssl_util.h"

namespace cairn::tls::internal {

class TlsStream : public net::Stream {
 public:
  // `ssl` is set up for its role (accept or connect state) but not attached to a socket.
  // `inner` must have a NativeHandle (a socket).
  TlsStream(std::unique_ptr<net::Stream> inner, SslPtr ssl, bool server);
  ~TlsStream() override;

  // Client: runs the handshake now (`timeout` bounds each wait for the socket).
  Status Handshake(std::chrono::milliseconds timeout) EXCLUDES(mu_);

  Status ReadFull(std::span<char> out) override EXCLUDES(mu_);
  Status WriteAll(std::span<const std::span<const char>> buffers) override EXCLUDES(mu_);
  Status SendFile(std::span<const std::span<const char>> head, int fd, uint64_t offset,
                  uint64_t length) override EXCLUDES(mu_);
  void SetReadTimeout(std::chrono::milliseconds timeout) override;
  void SetWriteTimeout(std::chrono::milliseconds timeout) override;
  void Shutdown() override;
  std::string PeerName() const override { return inner_->PeerName(); }
  int NativeHandle() const override { return fd_; }
  bool PeerOnThisHost() const override { return inner_->PeerOnThisHost(); }
  std::string PeerPrincipal() const override EXCLUDES(mu_);
  bool PeerIsClusterNode() const override EXCLUDES(mu_);
  bool Encrypted() const override { return true; }

 private:
  enum class Op { kHandshake, kRead, kWrite };
  // Runs one SSL operation until it moves `*done` bytes (or completes, for the handshake).
  Status Drive(Op op, char* data, size_t size, size_t* done, std::chrono::milliseconds timeout)
      EXCLUDES(mu_);
  Status WaitFor(short events, std::chrono::milliseconds timeout, Op op);
  Status Failure(Op op, int ssl_error, int ret, const std::string& detail, long verify_result);
  // Server, before the first handshake byte: is the peer speaking TLS at all?
  Status CheckClientSpeaksTls(std::chrono::milliseconds timeout);
  Status ServerHandshakeOnce() EXCLUDES(mu_);
  Status WritePlain(std::span<const std::span<const char>> buffers);
  // Encrypts `buffers` into the write BIO (small ones gathered into one record) without
  // flushing it.
  Status WriteGathered(std::span<const std::span<const char>> buffers) EXCLUDES(mu_);
  Status WriteChunk(const char* data, size_t size) EXCLUDES(mu_);
  // Sends the records gathered in the write BIO (waiting for the socket, up to the write
  // timeout).
  Status Flush() EXCLUDES(mu_);

  std::unique_ptr<net::Stream> inner_;
  const int fd_;
  const bool server_;
  mutable Mutex mu_;
  SslPtr ssl_ GUARDED_BY(mu_);
  std::string principal_ GUARDED_BY(mu_);
  bool peer_is_node_ GUARDED_BY(mu_) = false;
  Mutex handshake_mu_;  // Serialises the server's lazy handshake.
  std::atomic<bool> handshaken_{false};
  std::atomic<bool> plaintext_peer_{false};
  std::atomic<bool> shut_{false};
  std::atomic<int64_t> read_timeout_ms_{0};
  std::atomic<int64_t> write_timeout_ms_{0};
  std::vector<char> staging_;     // Writer only: small buffers gathered into one record.
  std::vector<char> file_chunk_;  // Writer only: SendFile's bounce buffer, kept between calls.
};

}  // namespace cairn::tls::internal

#endif  // CAIRN_TLS_TLS_STREAM_H_
