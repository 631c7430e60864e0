#include "tls/certificates.h"

#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <cctype>

#include "tls/openssl_util.h"

namespace cairn::tls {
namespace {

using internal::BioPtr;
using internal::DrainErrors;
using internal::IsIpAddress;
using internal::PkeyPtr;
using internal::X509Ptr;

constexpr size_t kMaxCommonName = 64;  // X.509's upper bound for commonName.

Status OpenSslError(std::string_view what) {
  std::string m = "OpenSSL: " + std::string(what);
  std::string detail = DrainErrors();
  if (!detail.empty()) m += ": " + detail;
  return InternalError(std::move(m));
}

// RFC 1123 host names, with a leading "*." allowed for wildcards.
bool IsDnsName(std::string_view host) {
  if (host.rfind("*.", 0) == 0) host.remove_prefix(2);
  if (host.empty() || host.size() > 253) return false;
  size_t label = 0;
  for (char c : host) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    if (++label > 63) return false;
  }
  return label > 0;
}

Status CheckName(std::string_view name) {
  if (name.empty()) return InvalidArgumentError("a certificate needs a name (common name)");
  if (name.size() > kMaxCommonName) {
    return InvalidArgumentError("certificate name longer than 64 bytes: " + std::string(name));
  }
  for (char c : name) {
    if (!std::isprint(static_cast<unsigned char>(c))) {
      return InvalidArgumentError("certificate name with a control character");
    }
  }
  return Status::Ok();
}

StatusOr<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generating a P-256 key");
  return key;
}

std::string KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return OpenSslError("extension " + value);
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return OpenSslError("adding extension " + value);
  return Status::Ok();
}

// A certificate for `key` named `name`, valid from now+offset for `valid_for`, not yet signed.
StatusOr<X509Ptr> NewCertificate(EVP_PKEY* key, std::string_view name,
                                 std::chrono::seconds not_before_offset,
                                 std::chrono::seconds valid_for) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return OpenSslError("new certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("random serial");
  serial[0] &= 0x7f;  // A positive INTEGER.
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  ASN1_INTEGER* asn = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  if (asn == nullptr) return OpenSslError("serial number");
  const long start = static_cast<long>(not_before_offset.count());
  const long end = static_cast<long>((not_before_offset + valid_for).count());
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), start) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), end) == nullptr) {
    return OpenSslError("validity period");
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string cn(name);
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return OpenSslError("subject name");
  }
  if (X509_set_pubkey(cert.get(), key) != 1) return OpenSslError("public key");
  return cert;
}

Status Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) <= 0) return OpenSslError("signing");
  return Status::Ok();
}

}  // namespace

StatusOr<KeyAndCert> CreateCertificateAuthority(std::string_view name,
                                                std::chrono::seconds valid_for) {
  CAIRN_RETURN_IF_ERROR(CheckName(name));
  if (valid_for.count() <= 0) return InvalidArgumentError("a CA must be valid for some time");
  CAIRN_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  CAIRN_ASSIGN_OR_RETURN(X509Ptr cert,
                         NewCertificate(key.get(), name, std::chrono::seconds(-60), valid_for));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return OpenSslError("issuer name");
  }
  CAIRN_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  CAIRN_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  CAIRN_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  CAIRN_RETURN_IF_ERROR(Sign(cert.get(), key.get()));
  return KeyAndCert{KeyPem(key.get()), CertPem(cert.get())};
}

StatusOr<KeyAndCert> IssueCertificate(const KeyAndCert& ca, const CertSpec& spec) {
  CAIRN_RETURN_IF_ERROR(CheckName(spec.common_name));
  if (spec.valid_for.count() <= 0) {
    return InvalidArgumentError("a certificate must be valid for some time");
  }
  if (spec.role == CertRole::kNode && spec.hosts.empty()) {
    return InvalidArgumentError("a node certificate needs at least one host name or address");
  }
  std::string san;
  for (const std::string& host : spec.hosts) {
    if (!san.empty()) san += ",";
    if (IsIpAddress(host)) {
      san += "IP:" + host;
    } else if (IsDnsName(host)) {
      san += "DNS:" + host;
    } else {
      return InvalidArgumentError("'" + host + "' is neither a host name nor an IP address");
    }
  }
  X509Ptr ca_cert = internal::ParseCertificate(ca.cert_pem);
  if (!ca_cert) {
    DrainErrors();
    return InvalidArgumentError("the CA certificate does not parse as PEM");
  }
  if (X509_check_ca(ca_cert.get()) == 0) {
    return InvalidArgumentError("the CA certificate is not a CA");
  }
  BioPtr key_bio = internal::MemoryBio(ca.key_pem);
  // No passphrase callback prompting on the terminal: an encrypted key is refused.
  PkeyPtr ca_key(PEM_read_bio_PrivateKey(
      key_bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!ca_key) {
    DrainErrors();
    return InvalidArgumentError(
        "the CA key does not parse as PEM (an encrypted key is not "
        "supported)");
  }
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    DrainErrors();
    return InvalidArgumentError("the CA key does not match the CA certificate");
  }
  CAIRN_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  CAIRN_ASSIGN_OR_RETURN(X509Ptr cert, NewCertificate(key.get(), spec.common_name,
                                                      spec.not_before_offset, spec.valid_for));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1) {
    return OpenSslError("issuer name");
  }
  X509* c = cert.get();
  X509* issuer = ca_cert.get();
  CAIRN_RETURN_IF_ERROR(AddExtension(c, issuer, NID_basic_constraints, "critical,CA:FALSE"));
  CAIRN_RETURN_IF_ERROR(
      AddExtension(c, issuer, NID_key_usage, "critical,digitalSignature,keyAgreement"));
  CAIRN_RETURN_IF_ERROR(
      AddExtension(c, issuer, NID_ext_key_usage,
                   spec.role == CertRole::kNode ? "serverAuth,clientAuth" : "clientAuth"));
  CAIRN_RETURN_IF_ERROR(AddExtension(c, issuer, NID_subject_key_identifier, "hash"));
  CAIRN_RETURN_IF_ERROR(AddExtension(c, issuer, NID_authority_key_identifier, "keyid:always"));
  if (!san.empty()) CAIRN_RETURN_IF_ERROR(AddExtension(c, issuer, NID_subject_alt_name, san));
  CAIRN_RETURN_IF_ERROR(Sign(c, ca_key.get()));
  return KeyAndCert{KeyPem(key.get()), CertPem(c)};
}

StatusOr<std::string> CertificateCommonName(std::string_view cert_pem) {
  X509Ptr cert = internal::ParseCertificate(cert_pem);
  if (!cert) {
    DrainErrors();
    return InvalidArgumentError("not a PEM certificate");
  }
  char cn[kMaxCommonName + 1] = {};
  int n =
      X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof(cn));
  if (n < 0) return std::string();
  return std::string(cn, static_cast<size_t>(n));
}

StatusOr<int64_t> CertificateSecondsLeft(std::string_view cert_pem) {
  X509Ptr cert = internal::ParseCertificate(cert_pem);
  if (!cert) {
    DrainErrors();
    return InvalidArgumentError("not a PEM certificate");
  }
  int days = 0, seconds = 0;
  if (ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(cert.get())) != 1) {
    return InvalidArgumentError("the certificate's expiry does not parse");
  }
  return int64_t{days} * 86400 + seconds;
}

}  // namespace cairn::tls
