#include "auth/token.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include <charconv>
#include <map>
#include <optional>
#include <utility>

#include "auth/policy.h"

namespace cairn::auth {
namespace {

constexpr std::string_view kPrefix = "cairn1.";
constexpr std::string_view kPayloadMagic = "cairn-token-v1";
constexpr size_t kSignatureSize = 64;  // Ed25519.

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free_all(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string OpensslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64UrlEncode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = (uint32_t{static_cast<unsigned char>(in[i])} << 16) |
                 (uint32_t{static_cast<unsigned char>(in[i + 1])} << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  const size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t{static_cast<unsigned char>(in[i])} << 16;
    if (rest == 2) v |= uint32_t{static_cast<unsigned char>(in[i + 1])} << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    if (rest == 2) out += kB64[(v >> 6) & 63];
  }
  return out;
}

int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

// Strict: unpadded, canonical (unused low bits zero), only the URL alphabet.
std::optional<std::string> Base64UrlDecode(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = B64Value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

StatusOr<std::string> RawPublicKey(EVP_PKEY* key) {
  size_t len = 0;
  if (EVP_PKEY_get_raw_public_key(key, nullptr, &len) != 1 || len != 32) {
    return InvalidArgumentError("not an Ed25519 key: " + OpensslError());
  }
  std::string raw(len, '\0');
  if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &len) != 1) {
    return InternalError("reading the public key: " + OpensslError());
  }
  return raw;
}

StatusOr<std::string> KeyIdOf(EVP_PKEY* key) {
  auto raw = RawPublicKey(key);
  if (!raw.ok()) return raw.status();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(raw->data()), raw->size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 8; ++i) {
    id += kHex[digest[i] >> 4];
    id += kHex[digest[i] & 15];
  }
  return id;
}

bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string Payload(const TokenClaims& c, std::string_view key_id) {
  return std::string(kPayloadMagic) + "\n" + c.principal + "\n" + std::to_string(c.issued_at) +
         "\n" + std::to_string(c.expires_at) + "\n" + std::string(key_id);
}

Status ValidateClaims(const TokenClaims& c) {
  if (c.principal == kAnyPrincipal) return InvalidArgumentError("a token cannot be for '*'");
  CAIRN_RETURN_IF_ERROR(ValidatePrincipal(c.principal));
  if (c.issued_at < 0 || c.expires_at <= c.issued_at) {
    return InvalidArgumentError("a token must expire after it is issued");
  }
  if (c.expires_at - c.issued_at > kMaxTokenTtlSeconds) {
    return InvalidArgumentError("a token may be valid for at most 366 days");
  }
  return Status::Ok();
}

// Splits a token into its signed part, payload and signature (all checked for shape only).
struct TokenParts {
  std::string_view signed_part;
  TokenClaims claims;
  std::string signature;
};

StatusOr<TokenParts> Split(std::string_view token) {
  auto malformed = [](std::string_view why) {
    return InvalidArgumentError("malformed token (" + std::string(why) + ")");
  };
  if (token.size() > kMaxTokenSize) return malformed("too long");
  if (!token.starts_with(kPrefix)) return malformed("it does not start with cairn1.");
  size_t dot = token.find('.', kPrefix.size());
  if (dot == std::string_view::npos) return malformed("no signature");
  TokenParts parts;
  parts.signed_part = token.substr(0, dot);
  auto payload = Base64UrlDecode(token.substr(kPrefix.size(), dot - kPrefix.size()));
  auto signature = Base64UrlDecode(token.substr(dot + 1));
  if (!payload || !signature) return malformed("not base64url");
  if (signature->size() != kSignatureSize) return malformed("wrong signature size");
  parts.signature = std::move(*signature);
  std::vector<std::string_view> fields;
  std::string_view rest = *payload;
  while (fields.size() < 6) {
    size_t nl = rest.find('\n');
    fields.push_back(rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  if (fields.size() != 5 || fields[0] != kPayloadMagic) return malformed("unknown payload");
  TokenClaims& c = parts.claims;
  c.principal = std::string(fields[1]);
  c.key_id = std::string(fields[4]);
  if (!ParseInt64(fields[2], &c.issued_at) || !ParseInt64(fields[3], &c.expires_at)) {
    return malformed("bad times");
  }
  Status valid = ValidateClaims(c);
  if (!valid.ok()) return malformed(valid.message());
  return parts;
}

}  // namespace

struct TokenSigner::Key {
  PkeyPtr pkey;
};

struct TokenVerifier::Keys {
  std::map<std::string, PkeyPtr, std::less<>> by_id;
};

StatusOr<KeyPairPem> GenerateTokenKey() {
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return InternalError("generating an Ed25519 key: " + OpensslError());
  }
  PkeyPtr key(raw);
  KeyPairPem out;
  std::unique_ptr<BIO, BioFree> priv(BIO_new(BIO_s_mem()));
  std::unique_ptr<BIO, BioFree> pub(BIO_new(BIO_s_mem()));
  if (!priv || !pub ||
      PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1) {
    return InternalError("encoding the token key: " + OpensslError());
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(priv.get(), &data);
  out.private_key.assign(data, static_cast<size_t>(n));
  n = BIO_get_mem_data(pub.get(), &data);
  out.public_key.assign(data, static_cast<size_t>(n));
  return out;
}

StatusOr<TokenSigner> TokenSigner::FromPrivateKeyPem(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  // An empty passphrase callback result: an encrypted key fails instead of prompting.
  auto no_passphrase = [](char*, int, int, void*) -> int { return 0; };
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
  if (!key) {
    return InvalidArgumentError("not an unencrypted PEM private key: " + OpensslError());
  }
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return InvalidArgumentError("the token key must be Ed25519 (cairn token keygen)");
  }
  auto id = KeyIdOf(key.get());
  if (!id.ok()) return id.status();
  auto k = std::make_shared<Key>();
  k->pkey = std::move(key);
  return TokenSigner(std::move(k), std::move(id).value());
}

StatusOr<std::string> TokenSigner::Sign(const TokenClaims& claims) const {
  CAIRN_RETURN_IF_ERROR(ValidateClaims(claims));
  std::string token = std::string(kPrefix) + Base64UrlEncode(Payload(claims, key_id_));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> md(EVP_MD_CTX_new());
  unsigned char sig[kSignatureSize];
  size_t sig_len = sizeof(sig);
  if (!md || EVP_DigestSignInit(md.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(md.get(), sig, &sig_len, reinterpret_cast<const unsigned char*>(token.data()),
                     token.size()) != 1) {
    return InternalError("signing the token: " + OpensslError());
  }
  token += '.';
  token += Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(sig), sig_len));
  if (token.size() > kMaxTokenSize) return InvalidArgumentError("token too long");
  return token;
}

StatusOr<TokenVerifier> TokenVerifier::FromPublicKeyPems(const std::vector<std::string>& pems) {
  if (pems.empty()) return InvalidArgumentError("no token public key");
  auto keys = std::make_shared<Keys>();
  for (const std::string& pem : pems) {
    std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    PkeyPtr key(bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    if (!key) return InvalidArgumentError("not a PEM public key: " + OpensslError());
    if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
      return InvalidArgumentError("a token public key must be Ed25519 (cairn token keygen)");
    }
    auto id = KeyIdOf(key.get());
    if (!id.ok()) return id.status();
    keys->by_id.emplace(std::move(id).value(), std::move(key));
  }
  return TokenVerifier(std::move(keys));
}

std::vector<std::string> TokenVerifier::key_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, key] : keys_->by_id) ids.push_back(id);
  return ids;
}

StatusOr<TokenClaims> TokenVerifier::Verify(std::string_view token, int64_t now_unix) const {
  auto parts = Split(token);
  if (!parts.ok()) return PermissionDeniedError(parts.status().message());
  TokenClaims& c = parts->claims;
  auto it = keys_->by_id.find(c.key_id);
  if (it == keys_->by_id.end()) {
    return PermissionDeniedError("token signed by an unknown key (" + c.key_id.substr(0, 16) + ")");
  }
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> md(EVP_MD_CTX_new());
  const auto* sig = reinterpret_cast<const unsigned char*>(parts->signature.data());
  const auto* msg = reinterpret_cast<const unsigned char*>(parts->signed_part.data());
  if (!md || EVP_DigestVerifyInit(md.get(), nullptr, nullptr, nullptr, it->second.get()) != 1 ||
      EVP_DigestVerify(md.get(), sig, parts->signature.size(), msg, parts->signed_part.size()) !=
          1) {
    ERR_clear_error();
    return PermissionDeniedError("token has a bad signature");
  }
  if (c.issued_at > now_unix + kMaxClockSkewSeconds) {
    return PermissionDeniedError("token issued in the future (check the clocks)");
  }
  if (now_unix >= c.expires_at) {
    return PermissionDeniedError("token for '" + c.principal + "' expired " +
                                 std::to_string(now_unix - c.expires_at) + " s ago");
  }
  return std::move(c);
}

StatusOr<TokenClaims> DecodeTokenUnverified(std::string_view token) {
  auto parts = Split(token);
  if (!parts.ok()) return parts.status();
  return std::move(parts->claims);
}

}  // namespace cairn::auth
