// TlsContext: TLS 1.3 (OpenSSL) for the page protocol, on both ends of a connection.
//
// A server context wraps accepted streams; the handshake runs inside the first ReadFull, so it
// is bounded by the connection's read timeout and costs the accepting thread nothing. A client
// context dials: Connect runs the handshake at once, so a refused server certificate surfaces
// where the connection was asked for, with its reason. A refused *client* certificate cannot:
// in TLS 1.3 the client's handshake completes before the server checks its certificate, so the
// refusal arrives on the client's first read (PermissionDenied with the server's alert, or
// Unavailable if the connection closed first). Both ends verify the other against `ca_file`; a
// client checks that the server's certificate names the host it dialled (DNS or IP subjectAltName);
// a server with `require_peer_certificate` (mutual TLS, the cluster default) refuses clients
// without a valid certificate. TLS 1.2 and older are refused.
//
// Refusals and what they mean (Status codes of ReadFull/WriteAll/Connect):
//   FailedPrecondition  the peer spoke plaintext to a TLS server ("plaintext connection refused:
//                       TLS is required"). The server stream then writes in the clear, once,
//                       so the caller can say why in the peer's own protocol, and never reads.
//   PermissionDenied    a certificate was refused: expired, not yet valid, wrong host, untrusted
//                       CA, missing or bad client certificate (the message names which).
//   Unavailable         the connection closed or failed, including a TLS client dialling a
//                       plaintext server ("... is the server plaintext?").
//   DeadlineExceeded    the handshake or a read/write made no progress within its timeout.
//
// Certificates are reloaded without a restart: at most once per `reload_check_interval` a new
// connection compares the files' identity (inode, size, mtime) with what was loaded; changed
// files are loaded into a new OpenSSL context used by later connections (open ones keep
// theirs). Files that fail to load are logged and the previous context stays in use.
//
// Thread-safety: a TlsContext is thread-safe. A stream it makes follows net::Stream's rule (one
// reader and one writer thread at a time).
#ifndef CAIRN_TLS_TLS_CONTEXT_H_
#define CAIRN_TLS_TLS_CONTEXT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "net/stream.h"

struct ssl_st;
struct ssl_ctx_st;

namespace cairn::tls {

// What a verified certificate says about the other end of a finished handshake.
struct PeerCertificate {
  std::string principal;      // Its subject's common name; empty without a certificate.
  bool cluster_node = false;  // It lists serverAuth among its extended key usages.
};
// Reads the peer certificate of `ssl` after a successful handshake (OpenSSL refused the
// handshake if the certificate did not verify, so one that is present is verified).
PeerCertificate PeerCertificateOf(const ssl_st* ssl);

struct TlsOptions {
  // This end's certificate (PEM, leaf first, then any intermediates) and private key. Required
  // for a server; a client without them cannot talk to a mutual-TLS server.
  std::string cert_file;
  std::string key_file;
  // CAs trusted for the other end's certificate (PEM bundle). Required.
  std::string ca_file;
  // Server only: refuse clients that present no valid certificate (mutual TLS).
  bool require_peer_certificate = true;
  std::chrono::milliseconds reload_check_interval{10000};
  Clock* clock = nullptr;  // Not owned; null: Clock::Real(). Times the reload checks.
};

class TlsContext {
 public:
  enum class Role { kServer, kClient };

  // Loads the files. InvalidArgument with the file and the reason if one is missing, does not
  // parse, or the key does not match the certificate.
  static StatusOr<std::shared_ptr<TlsContext>> Create(Role role, TlsOptions options);
  ~TlsContext();

  // Server: a TLS stream over an accepted connection (no I/O here, except re-reading changed
  // certificate files at most once per interval). Its first ReadFull runs the handshake under
  // the read timeout; a ReadFull of zero bytes runs only the handshake. Internal if OpenSSL
  // cannot allocate the connection's state.
  StatusOr<std::unique_ptr<net::Stream>> WrapAccepted(std::unique_ptr<net::Stream> tcp)
      EXCLUDES(mu_);

  // Client: the handshake over a connected stream, verifying that the server's certificate
  // names `host` (the host part of the address dialled: a DNS name or an IP address).
  StatusOr<std::unique_ptr<net::Stream>> Connect(std::unique_ptr<net::Stream> tcp,
                                                 std::string_view host,
                                                 std::chrono::milliseconds timeout) EXCLUDES(mu_);

  // Server: the current OpenSSL context, re-read when its files changed (as WrapAccepted does),
  // for a server that runs TLS through another library (src/http, on Asio). The pointer keeps
  // the context alive; it must not be modified.
  std::shared_ptr<ssl_ctx_st> NativeServerContext() EXCLUDES(mu_);

  // Loads the files again if they changed since the last load (ignores the interval). OK when
  // nothing changed; the load error otherwise (the previous certificates stay in use).
  Status ReloadIfChanged() EXCLUDES(mu_);
  // How many times the files were loaded (1 after Create).
  uint64_t generation() const EXCLUDES(mu_);

 private:
  struct Loaded;
  TlsContext(Role role, TlsOptions options);
  Status Load() EXCLUDES(mu_);
  std::shared_ptr<Loaded> Current() EXCLUDES(mu_);

  const Role role_;
  const TlsOptions options_;
  mutable Mutex mu_;
  std::shared_ptr<Loaded> loaded_ GUARDED_BY(mu_);
  std::string files_signature_ GUARDED_BY(mu_);
  int64_t last_check_us_ GUARDED_BY(mu_) = 0;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
};

// "host:port" -> a client stream: TCP, then TLS when `tls` is set. The usual dialler of
// transport::RemoteChannelOptions::connect.
StatusOr<std::unique_ptr<net::Stream>> Dial(TlsContext* tls, const std::string& address,
                                            std::chrono::milliseconds timeout);

}  // namespace cairn::tls

#endif  // CAIRN_TLS_TLS_CONTEXT_H_
