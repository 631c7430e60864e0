#include "auth/token.h"

#include <gtest/gtest.h>

namespace cairn::auth {
namespace {

constexpr int64_t kNow = 1'800'000'000;

struct Keys {
  TokenSigner signer;
  std::string public_pem;
};

Keys NewKeys() {
  auto pair = GenerateTokenKey();
  EXPECT_TRUE(pair.ok()) << pair.status().ToString();
  auto signer = TokenSigner::FromPrivateKeyPem(pair->private_key);
  EXPECT_TRUE(signer.ok()) << signer.status().ToString();
  return Keys{std::move(signer).value(), pair->public_key};
}

TokenClaims Claims(std::string principal, int64_t ttl = 3600) {
  return TokenClaims{std::move(principal), kNow - 10, kNow - 10 + ttl, ""};
}

TEST(TokenTest, SignedTokenVerifiesWithThePublicKey) {
  Keys k = NewKeys();
  auto token = k.signer.Sign(Claims("team-a"));
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_TRUE(token->starts_with("cairn1."));
  EXPECT_LE(token->size(), kMaxTokenSize);
  auto verifier = TokenVerifier::FromPublicKeyPems({k.public_pem});
  ASSERT_TRUE(verifier.ok()) << verifier.status().ToString();
  auto claims = verifier->Verify(*token, kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->principal, "team-a");
  EXPECT_EQ(claims->expires_at, kNow - 10 + 3600);
  EXPECT_EQ(claims->key_id, k.signer.key_id());
  EXPECT_EQ(verifier->key_ids(), std::vector<std::string>{k.signer.key_id()});
}

TEST(TokenTest, ExpiredAndFutureTokensAreRefused) {
  Keys k = NewKeys();
  auto verifier = TokenVerifier::FromPublicKeyPems({k.public_pem});
  ASSERT_TRUE(verifier.ok());
  std::string token = *k.signer.Sign(Claims("team-a", 60));
  auto late = verifier->Verify(token, kNow + 50);
  EXPECT_EQ(late.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(late.status().message().find("expired"), std::string::npos);
  auto early = verifier->Verify(token, kNow - kMaxClockSkewSeconds - 100);
  EXPECT_EQ(early.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(early.status().message().find("future"), std::string::npos);
}

TEST(TokenTest, ForeignKeyAndTamperedTokensAreRefused) {
  Keys k = NewKeys();
  Keys other = NewKeys();
  auto verifier = TokenVerifier::FromPublicKeyPems({k.public_pem});
  ASSERT_TRUE(verifier.ok());
  auto foreign = verifier->Verify(*other.signer.Sign(Claims("team-a")), kNow);
  EXPECT_NE(foreign.status().message().find("unknown key"), std::string::npos);

  std::string token = *k.signer.Sign(Claims("team-a"));
  // Every single-character change is refused (a different payload, signature or shape).
  for (size_t i = 0; i < token.size(); ++i) {
    std::string bad = token;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(verifier->Verify(bad, kNow).ok()) << i;
  }
  // A payload re-encoded for another principal with the old signature.
  Keys same = k;
  std::string b = *same.signer.Sign(Claims("team-b"));
  std::string spliced = b.substr(0, b.rfind('.')) + token.substr(token.rfind('.'));
  EXPECT_EQ(verifier->Verify(spliced, kNow).status().message(), "token has a bad signature");
}

TEST(TokenTest, MalformedTokensAreErrorsNotCrashes) {
  Keys k = NewKeys();
  auto verifier = TokenVerifier::FromPublicKeyPems({k.public_pem});
  ASSERT_TRUE(verifier.ok());
  for (std::string bad : {std::string(), std::string("cairn1."), std::string("cairn1.."),
                          std::string("cairn1.abc.def"), std::string("jwt.a.b"),
                          std::string(5000, 'a'), std::string("cairn1.\xff\xfe.zz")}) {
    auto r = verifier->Verify(bad, kNow);
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << bad;
    EXPECT_FALSE(DecodeTokenUnverified(bad).ok());
  }
}

TEST(TokenTest, RotationTrustsEveryConfiguredKey) {
  Keys old_key = NewKeys();
  Keys new_key = NewKeys();
  auto verifier = TokenVerifier::FromPublicKeyPems({old_key.public_pem, new_key.public_pem});
  ASSERT_TRUE(verifier.ok());
  EXPECT_TRUE(verifier->Verify(*old_key.signer.Sign(Claims("a")), kNow).ok());
  EXPECT_TRUE(verifier->Verify(*new_key.signer.Sign(Claims("b")), kNow).ok());
}

TEST(TokenTest, SignerRefusesBadClaimsAndKeys) {
  Keys k = NewKeys();
  EXPECT_FALSE(k.signer.Sign(Claims("*")).ok());
  EXPECT_FALSE(k.signer.Sign(Claims("a b")).ok());
  EXPECT_FALSE(k.signer.Sign(Claims("a", 0)).ok());
  EXPECT_FALSE(k.signer.Sign(Claims("a", kMaxTokenTtlSeconds + 1)).ok());
  EXPECT_FALSE(TokenSigner::FromPrivateKeyPem("not a key").ok());
  EXPECT_FALSE(TokenSigner::FromPrivateKeyPem(k.public_pem).ok());
  EXPECT_FALSE(TokenVerifier::FromPublicKeyPems({}).ok());
  EXPECT_FALSE(TokenVerifier::FromPublicKeyPems({"junk"}).ok());
}

TEST(TokenTest, UnverifiedDecodeShowsTheClaims) {
  Keys k = NewKeys();
  auto claims = DecodeTokenUnverified(*k.signer.Sign(Claims("team-a")));
  ASSERT_TRUE(claims.ok());
  EXPECT_EQ(claims->principal, "team-a");
  EXPECT_EQ(claims->key_id, k.signer.key_id());
}

}  // namespace
}  // namespace cairn::auth
