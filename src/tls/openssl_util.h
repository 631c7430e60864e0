// Internal to src/tls: owning pointers for OpenSSL objects and the text of its error queue.
#ifndef CAIRN_TLS_OPENSSL_UTIL_H_
#define CAIRN_TLS_OPENSSL_UTIL_H_

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>

namespace cairn::tls::internal {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};

using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Deleter<SSL, SSL_free>>;

// Drains this thread's OpenSSL error queue into one line ("" when empty). Every failed OpenSSL
// call is followed by this, so a stale error never shows up in a later, unrelated message.
inline std::string DrainErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    // "error:0A000086:SSL routines::certificate verify failed" -> keep the reason only.
    std::string_view text(buf);
    size_t colon = text.rfind(':');
    if (colon != std::string_view::npos) text.remove_prefix(colon + 1);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

// True for a numeric IPv4 or IPv6 address (which certificates carry as IP, not DNS, names).
inline bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

inline BioPtr MemoryBio(std::string_view data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

inline X509Ptr ParseCertificate(std::string_view pem) {
  BioPtr bio = MemoryBio(pem);
  if (!bio) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace cairn::tls::internal

#endif  // CAIRN_TLS_OPENSSL_UTIL_H_
