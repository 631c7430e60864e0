// Signed bearer tokens for jobs: a principal and an expiry, signed with the cluster's Ed25519
// token key, verified by every worker with only the public key (no round trip, no shared
// secret on the workers). `cairn token keygen` makes the key pair, `cairn token issue` a token.
//
// Format (docs/security.md): "cairn1." base64url(payload) "." base64url(signature), where the
// payload is the text "cairn-token-v1\n<principal>\n<issued unix s>\n<expires unix s>\n<key id>"
// and the signature is Ed25519 over everything before the second '.'. The key id (16 hex
// digits of the SHA-256 of the public key) picks the verifying key, so a cluster can trust the
// old and the new key while it rotates.
//
// A token is a bearer credential: whoever holds it is the principal until it expires. Clients
// send it only over TLS (or to a worker on the same machine).
//
// Thread-safety: TokenSigner and TokenVerifier are immutable after creation; share freely.
#ifndef CAIRN_AUTH_TOKEN_H_
#define CAIRN_AUTH_TOKEN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::auth {

inline constexpr size_t kMaxTokenSize = 1024;
inline constexpr int64_t kMaxTokenTtlSeconds = 366LL * 24 * 3600;
// A token issued this far in the verifier's future is refused (clocks disagree too much).
inline constexpr int64_t kMaxClockSkewSeconds = 300;

struct TokenClaims {
  std::string principal;   // auth::ValidatePrincipal, never "*".
  int64_t issued_at = 0;   // Unix seconds.
  int64_t expires_at = 0;  // Unix seconds; after issued_at, at most kMaxTokenTtlSeconds later.
  std::string key_id;      // Set by Sign and Verify.
};

struct KeyPairPem {
  std::string private_key;  // PKCS#8 PEM, unencrypted: store it 0600.
  std::string public_key;   // SubjectPublicKeyInfo PEM.
};
// A fresh Ed25519 key pair. Internal on an OpenSSL failure.
StatusOr<KeyPairPem> GenerateTokenKey();

class TokenSigner {
 public:
  // InvalidArgument for PEM that is not an unencrypted Ed25519 private key.
  static StatusOr<TokenSigner> FromPrivateKeyPem(std::string_view pem);
  // InvalidArgument for a bad principal or validity; Internal if signing fails.
  StatusOr<std::string> Sign(const TokenClaims& claims) const;
  const std::string& key_id() const { return key_id_; }

 private:
  struct Key;
  TokenSigner(std::shared_ptr<Key> key, std::string key_id)
      : key_(std::move(key)), key_id_(std::move(key_id)) {}
  std::shared_ptr<Key> key_;
  std::string key_id_;
};

class TokenVerifier {
 public:
  // Each PEM holds one Ed25519 public key (a file may be given per key). InvalidArgument for
  // anything else, or for no key at all.
  static StatusOr<TokenVerifier> FromPublicKeyPems(const std::vector<std::string>& pems);

  // The claims of a well-formed, correctly signed, currently valid token. PermissionDenied with
  // the reason otherwise ("malformed token", "signed by an unknown key", "bad signature",
  // "expired at ...", "issued in the future"): the reason is safe to show the client.
  StatusOr<TokenClaims> Verify(std::string_view token, int64_t now_unix) const;

  std::vector<std::string> key_ids() const;

 private:
  struct Keys;
  explicit TokenVerifier(std::shared_ptr<const Keys> keys) : keys_(std::move(keys)) {}
  std::shared_ptr<const Keys> keys_;
};

// The claims of a token without checking its signature or expiry (for `cairn token show`).
// InvalidArgument for a malformed token.
StatusOr<TokenClaims> DecodeTokenUnverified(std::string_view token);

}  // namespace cairn::auth

#endif  // CAIRN_AUTH_TOKEN_H_
