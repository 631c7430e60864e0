#include "tls/tls_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tls/tls_context.h"

namespace cairn::tls::internal {
namespace {

// Small buffers (a frame header, a reply's metadata) are gathered into one TLS record up to
// this size instead of costing a record, and its 22 bytes of overhead and a MAC, each.
constexpr size_t kGatherBytes = 16 * 1024;
constexpr size_t kFileChunk = 256 * 1024;
// OpenSSL writes each 16 KiB record with its own write to the BIO and, without read-ahead, reads
// each record with two (its header, then its body): 64 sends and 128 receives per MiB, each a
// system call and, on loopback, a wake-up of the other side. Records are gathered into this many
// bytes before a send (a buffering BIO, flushed at the end of every WriteAll and SendFile), and
// read ahead into a buffer of this size. 256 KiB measured best (docs/benchmarks.md: 0.81x
// plaintext throughput against 0.54x without batching; 64 KiB 0.72x, 1 MiB 0.69x; batching only
// the direction that carries pages measured 0.70x). It costs up to 512 KiB per connection once
// used: a worker at its cap of 1,024 connections holds up to 512 MiB in them.
constexpr int kSocketBatchBytes = 256 * 1024;
// The first byte of every TLS record that opens a connection (a handshake record).
constexpr unsigned char kTlsHandshakeRecord = 0x16;

// A socket BIO whose writes cannot raise SIGPIPE: OpenSSL's own socket BIO uses write(), and a
// process that embeds the client library need not ignore SIGPIPE, so a peer that hangs up (a
// worker refusing this client's certificate after the TLS 1.3 handshake) would kill it.
int SendWithoutSigpipe(BIO* bio, const char* data, int length) {
  int fd = -1;
  BIO_get_fd(bio, &fd);
  errno = 0;
  const ssize_t n = send(fd, data, static_cast<size_t>(length), MSG_NOSIGNAL);
  BIO_clear_retry_flags(bio);
  if (n <= 0 && BIO_sock_should_retry(static_cast<int>(n))) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

const BIO_METHOD* NoSigpipeSocketMethod() {
  static const BIO_METHOD* method = [] {
    const BIO_METHOD* base = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "cairn socket");
    BIO_meth_set_write(m, SendWithoutSigpipe);
    BIO_meth_set_read(m, BIO_meth_get_read(base));
    BIO_meth_set_puts(m, BIO_meth_get_puts(base));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
    BIO_meth_set_create(m, BIO_meth_get_create(base));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
    return m;
  }();
  return method;
}

const char* OpName(bool server, int op) {
  switch (op) {
    case 0:
      return server ? "TLS handshake from" : "TLS handshake with";
    case 1:
      return "TLS read from";
    default:
      return "TLS write to";
  }
}

bool Contains(const std::string& text, std::string_view what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TlsStream::TlsStream(std::unique_ptr<net::Stream> inner, SslPtr ssl, bool server)
    : inner_(std::move(inner)), fd_(inner_->NativeHandle()), server_(server), ssl_(std::move(ssl)) {
  int flags = fcntl(fd_, F_GETFL, 0);
  if (flags >= 0) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  MutexLock l(&mu_);
  BIO* socket_bio = BIO_new(NoSigpipeSocketMethod());
  BIO_set_fd(socket_bio, fd_, BIO_NOCLOSE);  // `inner_` owns and closes the socket.
  BIO* write_bio = BIO_new(BIO_f_buffer());
  BIO_set_write_buffer_size(write_bio, kSocketBatchBytes);
  // The SSL object owns one reference of the read BIO (the socket) and one of the write chain
  // (buffer -> socket): the socket BIO holds two, so freeing the chain stops at it.
  BIO_up_ref(socket_bio);
  BIO_push(write_bio, socket_bio);
  SSL_set_bio(ssl_.get(), socket_bio, write_bio);
  SSL_set_read_ahead(ssl_.get(), 1);  // A record's header and body in one receive, at least.
  SSL_set_default_read_buffer_len(ssl_.get(), kSocketBatchBytes);
}

TlsStream::~TlsStream() {
  if (handshaken_.load() && !shut_.load()) {
    // Best effort close_notify (non-blocking): the peer then sees an orderly end.
    MutexLock l(&mu_);
    SSL_shutdown(ssl_.get());
    (void)BIO_flush(SSL_get_wbio(ssl_.get()));
    ERR_clear_error();
  }
}

void TlsStream::SetReadTimeout(std::chrono::milliseconds timeout) {
  read_timeout_ms_ = timeout.count();
}

void TlsStream::SetWriteTimeout(std::chrono::milliseconds timeout) {
  write_timeout_ms_ = timeout.count();
}

void TlsStream::Shutdown() {
  shut_ = true;
  inner_->Shutdown();  // Wakes threads waiting in poll() (the socket reports POLLHUP).
}

std::string TlsStream::PeerPrincipal() const {
  MutexLock l(&mu_);
  return principal_;
}

bool TlsStream::PeerIsClusterNode() const {
  MutexLock l(&mu_);
  return peer_is_node_;
}

Status TlsStream::Handshake(std::chrono::milliseconds timeout) {
  size_t unused = 0;
  CAIRN_RETURN_IF_ERROR(Drive(Op::kHandshake, nullptr, 0, &unused, timeout));
  handshaken_ = true;
  return Status::Ok();
}

Status TlsStream::CheckClientSpeaksTls(std::chrono::milliseconds timeout) {
  while (true) {
    unsigned char first = 0;
    ssize_t n = recv(fd_, &first, 1, MSG_PEEK);
    if (n == 1) {
      if (first == kTlsHandshakeRecord) return Status::Ok();
      plaintext_peer_ = true;
      return FailedPreconditionError("plaintext connection refused: TLS is required");
    }
    if (n == 0) return UnavailableError("connection closed by " + PeerName());
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return UnavailableError("read from " + PeerName() + ": " + std::strerror(errno));
    }
    CAIRN_RETURN_IF_ERROR(WaitFor(POLLIN, timeout, Op::kHandshake));
  }
}

Status TlsStream::ServerHandshakeOnce() {
  MutexLock l(&handshake_mu_);
  if (handshaken_.load()) return Status::Ok();
  if (plaintext_peer_.load()) {
    return FailedPreconditionError("plaintext connection refused: TLS is required");
  }
  const std::chrono::milliseconds timeout(read_timeout_ms_.load());
  CAIRN_RETURN_IF_ERROR(CheckClientSpeaksTls(timeout));
  return Handshake(timeout);
}

Status TlsStream::ReadFull(std::span<char> out) {
  if (server_ && !handshaken_.load()) CAIRN_RETURN_IF_ERROR(ServerHandshakeOnce());
  size_t done = 0;
  while (done < out.size()) {
    size_t n = 0;
    CAIRN_RETURN_IF_ERROR(Drive(Op::kRead, out.data() + done, out.size() - done, &n,
                                std::chrono::milliseconds(read_timeout_ms_.load())));
    done += n;
  }
  return Status::Ok();
}

Status TlsStream::WriteAll(std::span<const std::span<const char>> buffers) {
  if (plaintext_peer_.load()) return WritePlain(buffers);
  if (!handshaken_.load()) return FailedPreconditionError("TLS write before the handshake");
  CAIRN_RETURN_IF_ERROR(WriteGathered(buffers));
  return Flush();
}

Status TlsStream::WriteGathered(std::span<const std::span<const char>> buffers) {
  staging_.clear();
  for (std::span<const char> b : buffers) {
    if (b.size() < kGatherBytes) {
      staging_.insert(staging_.end(), b.begin(), b.end());
      if (staging_.size() < kGatherBytes) continue;
      CAIRN_RETURN_IF_ERROR(WriteChunk(staging_.data(), staging_.size()));
      staging_.clear();
      continue;
    }
    if (!staging_.empty()) {
      CAIRN_RETURN_IF_ERROR(WriteChunk(staging_.data(), staging_.size()));
      staging_.clear();
    }
    CAIRN_RETURN_IF_ERROR(WriteChunk(b.data(), b.size()));
  }
  if (!staging_.empty()) CAIRN_RETURN_IF_ERROR(WriteChunk(staging_.data(), staging_.size()));
  return Status::Ok();
}

Status TlsStream::SendFile(std::span<const std::span<const char>> head, int fd, uint64_t offset,
                           uint64_t length) {
  if (!handshaken_.load()) return FailedPreconditionError("TLS write before the handshake");
  // No sendfile through TLS without kernel TLS: the bytes pass through user space once. A small
  // head (a page reply's frame header and metadata) goes into the same buffer as the file's
  // first bytes, so a small reply is one record and one send.
  std::vector<char>& chunk = file_chunk_;
  if (chunk.size() < kFileChunk) chunk.resize(kFileChunk);
  size_t used = 0;
  for (std::span<const char> b : head) used += b.size();
  if (used <= kGatherBytes) {
    char* at = chunk.data();
    for (std::span<const char> b : head) at = std::copy(b.begin(), b.end(), at);
  } else {
    CAIRN_RETURN_IF_ERROR(WriteGathered(head));
    used = 0;
  }
  while (length > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(length, chunk.size() - used));
    ssize_t n = pread(fd, chunk.data() + used, want, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(std::string("reading the file to send: ") + std::strerror(errno));
    }
    if (n == 0) return IoError("source file shorter than expected (truncated page)");
    CAIRN_RETURN_IF_ERROR(WriteChunk(chunk.data(), used + static_cast<size_t>(n)));
    used = 0;
    offset += static_cast<uint64_t>(n);
    length -= static_cast<uint64_t>(n);
  }
  if (used > 0) CAIRN_RETURN_IF_ERROR(WriteChunk(chunk.data(), used));
  return Flush();
}

Status TlsStream::Flush() {
  const std::chrono::milliseconds timeout(write_timeout_ms_.load());
  while (true) {
    if (shut_.load()) return UnavailableError("connection to " + PeerName() + " shut down");
    bool retry = false;
    int saved_errno = 0;
    {
      MutexLock l(&mu_);
      BIO* wbio = SSL_get_wbio(ssl_.get());
      errno = 0;
      if (BIO_flush(wbio) > 0) return Status::Ok();
      saved_errno = errno;
      retry = BIO_should_retry(wbio);
    }
    if (!retry) {
      if (saved_errno == EPIPE || saved_errno == ECONNRESET) {
        return UnavailableError("connection closed by " + PeerName());
      }
      return UnavailableError("TLS write to " + PeerName() + ": " +
                              (saved_errno != 0 ? std::strerror(saved_errno) : "I/O error"));
    }
    CAIRN_RETURN_IF_ERROR(WaitFor(POLLOUT, timeout, Op::kWrite));
  }
}

Status TlsStream::WriteChunk(const char* data, size_t size) {
  const std::chrono::milliseconds timeout(write_timeout_ms_.load());
  size_t done = 0;
  while (done < size) {
    size_t n = 0;
    // The retry after WANT_WRITE passes the same bytes again (partial writes are enabled, so
    // `n` counts what went out).
    CAIRN_RETURN_IF_ERROR(
        Drive(Op::kWrite, const_cast<char*>(data) + done, size - done, &n, timeout));
    done += n;
  }
  return Status::Ok();
}

Status TlsStream::WritePlain(std::span<const std::span<const char>> buffers) {
  std::string all;
  for (auto b : buffers) all.append(b.data(), b.size());
  size_t done = 0;
  while (done < all.size()) {
    ssize_t n = send(fd_, all.data() + done, all.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      CAIRN_RETURN_IF_ERROR(
          WaitFor(POLLOUT, std::chrono::milliseconds(write_timeout_ms_.load()), Op::kWrite));
      continue;
    }
    return UnavailableError("write to " + PeerName() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status TlsStream::Drive(Op op, char* data, size_t size, size_t* done,
                        std::chrono::milliseconds timeout) {
  while (true) {
    if (shut_.load()) return UnavailableError("connection to " + PeerName() + " shut down");
    int err = SSL_ERROR_NONE;
    int ret = 0;
    int saved_errno = 0;
    std::string detail;
    long verify = X509_V_OK;
    {
      MutexLock l(&mu_);
      SSL* ssl = ssl_.get();
      ERR_clear_error();
      errno = 0;
      size_t n = 0;
      switch (op) {
        case Op::kHandshake:
          ret = SSL_do_handshake(ssl);
          break;
        case Op::kRead:
          ret = SSL_read_ex(ssl, data, size, &n);
          break;
        case Op::kWrite:
          ret = SSL_write_ex(ssl, data, size, &n);
          break;
      }
      if (ret == 1) {
        *done = n;
        if (op == Op::kHandshake) {
          PeerCertificate peer = PeerCertificateOf(ssl);
          principal_ = std::move(peer.principal);
          peer_is_node_ = peer.cluster_node;
        }
        return Status::Ok();
      }
      saved_errno = errno;
      err = SSL_get_error(ssl, ret);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        detail = DrainErrors();
        verify = SSL_get_verify_result(ssl);
      }
    }
    if (err == SSL_ERROR_WANT_READ) {
      CAIRN_RETURN_IF_ERROR(WaitFor(POLLIN, timeout, op));
    } else if (err == SSL_ERROR_WANT_WRITE) {
      CAIRN_RETURN_IF_ERROR(WaitFor(POLLOUT, timeout, op));
    } else {
      errno = saved_errno;
      return Failure(op, err, ret, detail, verify);
    }
  }
}

Status TlsStream::WaitFor(short events, std::chrono::milliseconds timeout, Op op) {
  pollfd p{fd_, events, 0};
  const int ms =
      timeout.count() > 0 ? static_cast<int>(std::min<int64_t>(timeout.count(), 1 << 30)) : -1;
  while (true) {
    int rc = poll(&p, 1, ms);
    if (rc > 0) break;
    if (rc == 0) {
      return DeadlineExceededError(std::string(OpName(server_, static_cast<int>(op))) + " " +
                                   PeerName() + ": no progress in " +
                                   std::to_string(timeout.count()) + " ms");
    }
    if (errno != EINTR) {
      return UnavailableError("poll on " + PeerName() + ": " + std::strerror(errno));
    }
  }
  if (shut_.load()) return UnavailableError("connection to " + PeerName() + " shut down");
  return Status::Ok();
}

Status TlsStream::Failure(Op op, int ssl_error, int ret, const std::string& detail,
                          long verify_result) {
  const std::string what = std::string(OpName(server_, static_cast<int>(op))) + " " + PeerName();
  if (ssl_error == SSL_ERROR_ZERO_RETURN)
    return UnavailableError("connection closed by " + PeerName());
  if (op == Op::kHandshake && verify_result != X509_V_OK) {
    return PermissionDeniedError(
        what + ": " + (server_ ? "client" : "server") +
        " certificate refused: " + X509_verify_cert_error_string(verify_result));
  }
  if (Contains(detail, "certificate") || Contains(detail, "alert unknown ca") ||
      Contains(detail, "alert access denied") || Contains(detail, "alert handshake failure")) {
    // The peer refused our certificate (an alert), or none was presented to a server that
    // requires one.
    return PermissionDeniedError(what + ": " + detail);
  }
  const bool eof =
      (ssl_error == SSL_ERROR_SYSCALL && (errno == 0 || errno == ECONNRESET || errno == EPIPE)) ||
      Contains(detail, "unexpected eof");
  if (eof) {
    if (op == Op::kHandshake && !server_) {
      return UnavailableError(what +
                              ": connection closed during the handshake (is the server "
                              "plaintext, or did it refuse this client?)");
    }
    return UnavailableError("connection closed by " + PeerName());
  }
  if (ssl_error == SSL_ERROR_SYSCALL) {
    return UnavailableError(what + ": " + (errno != 0 ? std::strerror(errno) : "I/O error"));
  }
  return UnavailableError(what + ": " +
                          (detail.empty() ? "TLS error " + std::to_string(ret) : detail));
}

}  // namespace cairn::tls::internal
