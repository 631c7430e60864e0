#include "worker/request_authorizer.h"

#include <gtest/gtest.h>

namespace cairn::worker {
namespace {

constexpr auth::AccessSet kRead = static_cast<auth::AccessSet>(auth::Access::kRead);

protocol::PageRef Page(std::string mount, std::string key) {
  protocol::PageRef p;
  p.mount = std::move(mount);
  p.key = std::move(key);
  return p;
}

TEST(RequestPathTest, OnlyPlainPathsPass) {
  EXPECT_EQ(*RequestPath(Page("/lake", "a/b.bin")), "/lake/a/b.bin");
  EXPECT_EQ(*RequestPath(Page("/", "a")), "/a");
  EXPECT_EQ(*RequestPath(Page("/lake/x", "a//b")), "/lake/x/a//b");  // S3 keys may hold "//".
  for (auto [mount, key] : std::vector<std::pair<std::string, std::string>>{{"/lake", "../other/x"},
                                                                            {"/lake", "a/./b"},
                                                                            {"/lake", "a/.."},
                                                                            {"/lake", "/abs"},
                                                                            {"/lake", ""},
                                                                            {"lake", "a"},
                                                                            {"/lake/", "a"},
                                                                            {"/lake/../x", "a"},
                                                                            {"", "a"},
                                                                            {"/la//ke", "a"}}) {
    EXPECT_EQ(RequestPath(Page(mount, key)).status().code(), StatusCode::kInvalidArgument)
        << mount << " " << key;
  }
}

TEST(RequestAuthorizerTest, TokensAreCheckedAgainstTheInjectedClock) {
  auto keys = auth::GenerateTokenKey();
  ASSERT_TRUE(keys.ok());
  auto signer = auth::TokenSigner::FromPrivateKeyPem(keys->private_key);
  auto verifier = auth::TokenVerifier::FromPublicKeyPems({keys->public_key});
  ASSERT_TRUE(signer.ok() && verifier.ok());
  FakeClock clock(1'000'000);  // Wall time: 1 s after the epoch.
  RequestAuthorizer::Options o;
  o.tokens = *verifier;
  o.clock = &clock;
  RequestAuthorizer authorizer(std::move(o));
  std::string token = *signer->Sign({"job", 0, 100, ""});

  auth::Identity node{auth::Identity::Source::kCertificate, "w2", true};
  auto id = authorizer.IdentityOfToken(node, token);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->principal, "job");
  EXPECT_EQ(id->source, auth::Identity::Source::kToken);
  EXPECT_TRUE(id->cluster_node) << "a node keeps its certificate's role";
  EXPECT_FALSE(authorizer.IdentityOfToken({}, token)->cluster_node);

  clock.Advance(std::chrono::seconds(100));
  EXPECT_EQ(authorizer.IdentityOfToken({}, token).status().code(), StatusCode::kPermissionDenied);
}

TEST(RequestAuthorizerTest, ChecksEachRequestTypeAndStartsOpen) {
  RequestAuthorizer authorizer({});
  ConnectionAudit audit("test-peer");
  auth::Identity team{auth::Identity::Source::kCertificate, "team", false};
  protocol::ReadPageRequest read;
  read.page = Page("/lake", "x");
  protocol::CopyFromPeerRequest copy;
  copy.page = Page("/lake", "x");
  copy.peer = "w2";
  // No policy yet (a node without etcd): everything is allowed.
  EXPECT_TRUE(authorizer.Check({}, copy, &audit).ok());

  authorizer.SetPolicy({true, {{"team", "/lake", kRead}}});
  EXPECT_TRUE(authorizer.Check(team, read, &audit).ok());
  EXPECT_EQ(authorizer.Check(team, copy, &audit).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(
      authorizer.Check({auth::Identity::Source::kCertificate, "w2", true}, copy, &audit).ok());
  read.page = Page("/lake2", "x");
  EXPECT_EQ(authorizer.Check(team, read, &audit).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(authorizer.policy()->policy().grants.size(), 1u);
}

}  // namespace
}  // namespace cairn::worker
