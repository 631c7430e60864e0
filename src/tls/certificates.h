// Certificates for a Cairn cluster: a small private CA and the node and client certificates it
// signs (what `cairn cert` writes, and what the TLS tests use). docs/security.md describes the
// layout and how to rotate.
//
// Keys are ECDSA P-256, signatures SHA-256, serial numbers 128 random bits. A CA certificate is
// `CA:TRUE, pathlen:0` (it signs leaves only); a leaf is `CA:FALSE` with the key usage of a TLS
// peer, the extended key usage of its role and one subjectAltName per host (a DNS name, or an
// IP address when the host parses as one). The common name is the principal the workers see.
//
// Thread-safety: free functions, no shared state.
#ifndef CAIRN_TLS_CERTIFICATES_H_
#define CAIRN_TLS_CERTIFICATES_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::tls {

// A private key and its certificate, both PEM.
struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

enum class CertRole {
  kNode,    // A worker or any cluster member: serverAuth + clientAuth (it also dials peers).
  kClient,  // A client, a job or an operator: clientAuth only.
};

struct CertSpec {
  std::string common_name;         // The principal; required, printable, at most 64 bytes.
  std::vector<std::string> hosts;  // Names and addresses a node is reached by (SANs).
  CertRole role = CertRole::kNode;
  std::chrono::seconds valid_for{std::chrono::hours(24 * 365)};
  // Start of validity relative to now (negative backdates: tests make expired certificates
  // with a negative start and a short validity). Default: one minute ago, for clock skew.
  std::chrono::seconds not_before_offset{-60};
};

// A self-signed CA. InvalidArgument for an empty or oversized name or a validity <= 0.
StatusOr<KeyAndCert> CreateCertificateAuthority(std::string_view name,
                                                std::chrono::seconds valid_for);

// A leaf certificate signed by `ca`. InvalidArgument if `ca` does not parse, is not a CA, the
// spec is invalid (a node needs at least one host), or a host is neither a DNS name nor an IP.
StatusOr<KeyAndCert> IssueCertificate(const KeyAndCert& ca, const CertSpec& spec);

// The common name of a PEM certificate (tests, `cairn cert show`). InvalidArgument if it does
// not parse.
StatusOr<std::string> CertificateCommonName(std::string_view cert_pem);

// Seconds from now until the certificate expires (negative: expired). InvalidArgument if it
// does not parse.
StatusOr<int64_t> CertificateSecondsLeft(std::string_view cert_pem);

}  // namespace cairn::tls

#endif  // CAIRN_TLS_CERTIFICATES_H_
