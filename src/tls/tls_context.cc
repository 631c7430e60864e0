#include "tls/tls_context.h"

#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "tls/certificates.h"
#include "tls/openssl_util.h"
#include "tls/tls_stream.h"

namespace cairn::tls {

using internal::DrainErrors;
using internal::IsIpAddress;
using internal::SslCtxPtr;
using internal::SslPtr;

struct TlsContext::Loaded {
  SslCtxPtr ctx;
};

namespace {

constexpr char kCipherSuites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

Status FileError(std::string_view what, const std::string& path, std::string reason) {
  return InvalidArgumentError(std::string(what) + " " + path + ": " + reason);
}

// A file's identity for the reload check: a rename-into-place changes the inode, an edit in
// place the size or the modification time.
std::string FileSignature(const std::string& path) {
  if (path.empty()) return "-";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "missing";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

Status CheckReadable(std::string_view what, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return FileError(what, path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return FileError(what, path, "not a regular file");
  return Status::Ok();
}

StatusOr<SslCtxPtr> BuildContext(TlsContext::Role role, const TlsOptions& o) {
  const bool server = role == TlsContext::Role::kServer;
  if (o.ca_file.empty()) {
    return InvalidArgumentError("TLS needs a CA file (the CAs trusted for the other end)");
  }
  if (server && (o.cert_file.empty() || o.key_file.empty())) {
    return InvalidArgumentError("a TLS server needs a certificate and a key file");
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    return InvalidArgumentError(
        "TLS: a certificate file needs a key file, and a key a certificate");
  }
  CAIRN_RETURN_IF_ERROR(CheckReadable("TLS CA file", o.ca_file));
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  if (!ctx) return InternalError("OpenSSL: cannot create a TLS context: " + DrainErrors());
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
  // AES-128-GCM first: with AES-NI it encrypts pages about a third faster than AES-256-GCM,
  // OpenSSL's default first choice, at a security margin that is not the weak point here.
  SSL_CTX_set_ciphersuites(c, kCipherSuites);
  if (server) SSL_CTX_set_options(c, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // An encrypted key must fail to load, not prompt on the terminal (from a reload, in the
  // middle of serving).
  SSL_CTX_set_default_passwd_cb(c, [](char*, int, int, void*) { return 0; });
  if (!o.cert_file.empty()) {
    CAIRN_RETURN_IF_ERROR(CheckReadable("TLS certificate file", o.cert_file));
    CAIRN_RETURN_IF_ERROR(CheckReadable("TLS key file", o.key_file));
    if (SSL_CTX_use_certificate_chain_file(c, o.cert_file.c_str()) != 1) {
      return FileError("TLS certificate file", o.cert_file,
                       "not a PEM certificate: " + DrainErrors());
    }
    if (SSL_CTX_use_PrivateKey_file(c, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return FileError("TLS key file", o.key_file, "not a PEM private key: " + DrainErrors());
    }
    if (SSL_CTX_check_private_key(c) != 1) {
      return FileError("TLS key file", o.key_file,
                       "does not match the certificate in " + o.cert_file + ": " + DrainErrors());
    }
  }
  if (SSL_CTX_load_verify_locations(c, o.ca_file.c_str(), nullptr) != 1) {
    return FileError("TLS CA file", o.ca_file, "no PEM certificate in it: " + DrainErrors());
  }
  if (server) {
    int mode = SSL_VERIFY_PEER;
    if (o.require_peer_certificate) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(c, mode, nullptr);
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(c, names);
    // Connections are long-lived and never resumed: no session tickets to send or keep.
    SSL_CTX_set_num_tickets(c, 0);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  } else {
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  }
  ERR_clear_error();
  return ctx;
}

}  // namespace

TlsContext::TlsContext(Role role, TlsOptions options) : role_(role), options_(std::move(options)) {}

TlsContext::~TlsContext() = default;

StatusOr<std::shared_ptr<TlsContext>> TlsContext::Create(Role role, TlsOptions options) {
  std::shared_ptr<TlsContext> ctx(new TlsContext(role, std::move(options)));
  CAIRN_RETURN_IF_ERROR(ctx->Load());
  return ctx;
}

Status TlsContext::Load() {
  MutexLock l(&mu_);
  std::string signature = FileSignature(options_.cert_file) + "|" +
                          FileSignature(options_.key_file) + "|" + FileSignature(options_.ca_file);
  if (loaded_ != nullptr && signature == files_signature_) return Status::Ok();
  files_signature_ = signature;  // A broken set of files is tried again only once it changes.
  StatusOr<SslCtxPtr> ctx = BuildContext(role_, options_);
  if (!ctx.ok()) return ctx.status();
  auto loaded = std::make_shared<Loaded>();
  loaded->ctx = std::move(ctx).value();
  loaded_ = std::move(loaded);
  ++generation_;
  return Status::Ok();
}

Status TlsContext::ReloadIfChanged() {
  uint64_t before = generation();
  Status s = Load();
  if (!s.ok()) {
    spdlog::warn("TLS certificates not reloaded (still using the previous ones): {}", s.ToString());
    return s;
  }
  if (generation() != before && before > 0) {
    spdlog::info("TLS certificates reloaded from {}",
                 options_.cert_file.empty() ? options_.ca_file : options_.cert_file);
  }
  return Status::Ok();
}

uint64_t TlsContext::generation() const {
  MutexLock l(&mu_);
  return generation_;
}

std::shared_ptr<TlsContext::Loaded> TlsContext::Current() {
  Clock* clock = options_.clock != nullptr ? options_.clock : Clock::Real();
  const int64_t now = clock->NowMicros();
  bool check = false;
  {
    MutexLock l(&mu_);
    const int64_t interval_us =
        std::chrono::duration_cast<std::chrono::microseconds>(options_.reload_check_interval)
            .count();
    if (now - last_check_us_ >= interval_us) {
      last_check_us_ = now;
      check = true;
    }
  }
  if (check) ReloadIfChanged().IgnoreError();  // Logged; the previous context stays.
  MutexLock l(&mu_);
  return loaded_;
}

StatusOr<std::unique_ptr<net::Stream>> TlsContext::WrapAccepted(std::unique_ptr<net::Stream> tcp) {
  if (role_ != Role::kServer) return FailedPreconditionError("WrapAccepted needs a server context");
  if (tcp->NativeHandle() < 0) return InvalidArgumentError("TLS needs a socket stream");
  std::shared_ptr<Loaded> loaded = Current();
  SslPtr ssl(SSL_new(loaded->ctx.get()));  // Holds its own reference on the context.
  if (!ssl) return InternalError("OpenSSL: SSL_new: " + DrainErrors());
  SSL_set_accept_state(ssl.get());
  return std::unique_ptr<net::Stream>(
      std::make_unique<internal::TlsStream>(std::move(tcp), std::move(ssl), /*server=*/true));
}

std::shared_ptr<ssl_ctx_st> TlsContext::NativeServerContext() {
  std::shared_ptr<Loaded> loaded = Current();
  return std::shared_ptr<ssl_ctx_st>(loaded, loaded->ctx.get());
}

PeerCertificate PeerCertificateOf(const ssl_st* ssl) {
  PeerCertificate out;
  X509* peer = SSL_get0_peer_certificate(ssl);
  if (peer == nullptr) return out;
  char cn[65] = {};
  int len = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn));
  if (len > 0) out.principal.assign(cn, static_cast<size_t>(len));
  // Only a certificate that lists its purposes and names serverAuth among them (a certificate
  // without the extension is good for every purpose: not a node).
  out.cluster_node = (X509_get_extension_flags(peer) & EXFLAG_XKUSAGE) != 0 &&
                     (X509_get_extended_key_usage(peer) & XKU_SSL_SERVER) != 0;
  return out;
}

StatusOr<std::unique_ptr<net::Stream>> TlsContext::Connect(std::unique_ptr<net::Stream> tcp,
                                                           std::string_view host,
                                                           std::chrono::milliseconds timeout) {
  if (role_ != Role::kClient) return FailedPreconditionError("Connect needs a client TLS context");
  if (tcp->NativeHandle() < 0) return InvalidArgumentError("TLS needs a socket stream");
  std::shared_ptr<Loaded> loaded = Current();
  SslPtr ssl(SSL_new(loaded->ctx.get()));
  if (!ssl) return InternalError("OpenSSL: SSL_new: " + DrainErrors());
  SSL_set_connect_state(ssl.get());
  const std::string name(host);
  if (IsIpAddress(name)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), name.c_str());
    SSL_set1_host(ssl.get(), name.c_str());
  }
  auto stream =
      std::make_unique<internal::TlsStream>(std::move(tcp), std::move(ssl), /*server=*/false);
  stream->SetReadTimeout(timeout);
  stream->SetWriteTimeout(timeout);
  CAIRN_RETURN_IF_ERROR(stream->Handshake(timeout));
  stream->SetReadTimeout(std::chrono::milliseconds(0));
  stream->SetWriteTimeout(std::chrono::milliseconds(0));
  return std::unique_ptr<net::Stream>(std::move(stream));
}

StatusOr<std::unique_ptr<net::Stream>> Dial(TlsContext* tls, const std::string& address,
                                            std::chrono::milliseconds timeout) {
  std::string host;
  uint16_t port = 0;
  CAIRN_RETURN_IF_ERROR(net::ParseHostPort(address, &host, &port));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<net::Stream> tcp, net::ConnectTcp(address, timeout));
  if (tls == nullptr) return tcp;
  return tls->Connect(std::move(tcp), host, timeout);
}

}  // namespace cairn::tls
