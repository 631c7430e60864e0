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

template <typename T>
protocol::Request With(protocol::PageRef page) {
  T request;
  request.page = std::move(page);
  return request;
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

// A worker passes a renamed file to the owner of its new name (HandOver) with its node
// certificate: the owner takes a cluster node's writes without a grant (the worker the client
// reached checked the client's), and nothing else of the grants changes for nodes.
TEST(RequestAuthorizerTest, ClusterNodesMayWriteWithoutAGrant) {
  RequestAuthorizer authorizer({});
  ConnectionAudit audit("test-peer");
  authorizer.SetPolicy({true, {{"team", "/lake", kRead}}});
  const auth::Identity node{auth::Identity::Source::kCertificate, "w2", true};
  const auth::Identity team{auth::Identity::Source::kCertificate, "team", false};
  EXPECT_TRUE(authorizer.CheckWrite(node, "/lake/ckpt.pt", "write", &audit).ok());
  EXPECT_EQ(authorizer.CheckWrite(team, "/lake/ckpt.pt", "write", &audit).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(authorizer.CheckAccess(node, "/lake/x", auth::Access::kRead, "read", &audit).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(authorizer.CheckWrite(node, "/lake/../x", "write", &audit).code(),
            StatusCode::kInvalidArgument);
}

// A cluster worker that has not read the policy yet answers Unavailable, so that a client that
// still has it in its ring (a worker restarted at the same address) reads elsewhere instead of
// failing; cluster members are served (their requests do not depend on the policy).
TEST(RequestAuthorizerTest, AwaitingThePolicyIsUnavailableNotADenial) {
  metrics::Registry registry;
  RequestAuthorizer::Options options;
  options.registry = &registry;
  RequestAuthorizer authorizer(std::move(options));
  ConnectionAudit audit("test-peer");
  auth::Identity team{auth::Identity::Source::kCertificate, "team", false};
  protocol::ReadPageRequest read;
  read.page = Page("/lake", "x");
  authorizer.AwaitPolicy();
  EXPECT_TRUE(authorizer.policy()->enabled()) << "no short-circuit folders meanwhile";
  EXPECT_EQ(authorizer.Check(team, read, &audit).code(), StatusCode::kUnavailable);
  EXPECT_EQ(authorizer.Check({}, read, &audit).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(
      authorizer.Check({auth::Identity::Source::kCertificate, "w2", true}, read, &audit).ok());
  EXPECT_NE(registry.ExposeText().find("\ncairn_worker_requests_denied_total 0\n"),
            std::string::npos)
      << "not counted as denials";

  authorizer.SetPolicy({true, {{"team", "/lake", kRead}}});
  EXPECT_TRUE(authorizer.Check(team, read, &audit).ok());
  EXPECT_EQ(authorizer.Check({}, read, &audit).code(), StatusCode::kPermissionDenied);
}

TEST(RequestAuthorizerTest, MetadataShowsWhatTheGrantsAllowAndRefusesTheRest) {
  metrics::Registry registry;
  RequestAuthorizer::Options options;
  options.registry = &registry;
  RequestAuthorizer authorizer(std::move(options));
  ConnectionAudit audit("test-peer");
  auth::Identity team{auth::Identity::Source::kToken, "team", false};
  auto list = [](std::string path) { return protocol::ListDirRequest{0, std::move(path), "", 10}; };
  auto stat = [](std::string path) { return protocol::StatPathRequest{0, std::move(path)}; };

  // No policy: everything, for anyone; but a path that is not normalised never passes.
  auto open = authorizer.CheckMetadata({}, list("/lake"), &audit);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->everything);
  for (std::string bad : {"/lake/../x", "/lake/", "/lake//x", "/lake/./x"}) {
    EXPECT_EQ(authorizer.CheckMetadata(team, stat(bad), &audit).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }

  authorizer.AwaitPolicy();
  EXPECT_EQ(authorizer.CheckMetadata(team, list("/lake"), &audit).status().code(),
            StatusCode::kUnavailable);

  authorizer.SetPolicy({true, {{"team", "/lake/team", kRead}}});
  auto above = authorizer.CheckMetadata(team, list("/lake"), &audit);
  ASSERT_TRUE(above.ok()) << above.status().ToString();
  EXPECT_FALSE(above->everything);
  EXPECT_EQ(above->children, std::vector<std::string>{"team"});
  EXPECT_TRUE(authorizer.CheckMetadata(team, stat("/lake/team/x"), &audit)->everything);
  EXPECT_EQ(authorizer.CheckMetadata(team, stat("/lake/team2"), &audit).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(authorizer.CheckMetadata({}, list("/lake"), &audit).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_NE(registry.ExposeText().find("\ncairn_worker_requests_denied_total 2\n"),
            std::string::npos)
      << registry.ExposeText();

  // Another worker's question about pending files: cluster nodes only, whatever their grants
  // (the asking worker filters for its client); a principal with read on the path is refused.
  const protocol::ListPendingRequest pending{0, "/lake/team"};
  auth::Identity node{auth::Identity::Source::kCertificate, "worker-2", true};
  auto asked = authorizer.CheckMetadata(node, pending, &audit);
  ASSERT_TRUE(asked.ok()) << asked.status().ToString();
  EXPECT_TRUE(asked->everything);
  EXPECT_EQ(authorizer.CheckMetadata(team, pending, &audit).status().code(),
            StatusCode::kPermissionDenied);
  authorizer.SetPolicy({false, {}});
  EXPECT_TRUE(authorizer.CheckMetadata(team, pending, &audit).ok()) << "no policy: anyone";
}

// The authorization matrix: every principal kind x every operation x paths that include
// look-alike prefixes and the same path reached through different mounts, against a policy
// with read, admin and "*" grants. The expected verdict is written out here, independently of
// src/auth: read operations need read, load/drop need admin (admin does not imply read), peer
// operations need a cluster node, "*" is any authenticated principal (never anonymous), a
// prefix covers whole path segments only.
TEST(RequestAuthorizerTest, AuthorizationMatrix) {
  using auth::Identity;
  constexpr auth::AccessSet kAdmin = static_cast<auth::AccessSet>(auth::Access::kAdmin);
  RequestAuthorizer authorizer({});
  authorizer.SetPolicy({true,
                        {{"team-a", "/lake/a", kRead},
                         {"team-a", "/lake/a/ckpt", kAdmin},
                         {"team-b", "/lake/b", kRead | kAdmin},
                         {"*", "/public", kRead},
                         {"ops", "/lake", kAdmin}}});
  struct Who {
    const char* name;
    Identity id;
  };
  const std::vector<Who> principals = {
      {"anonymous", {}},
      {"team-a (certificate)", {Identity::Source::kCertificate, "team-a", false}},
      {"team-a (token)", {Identity::Source::kToken, "team-a", false}},
      {"team-b", {Identity::Source::kCertificate, "team-b", false}},
      {"ops", {Identity::Source::kToken, "ops", false}},
      {"stranger", {Identity::Source::kCertificate, "stranger", false}},
      {"node w2", {Identity::Source::kCertificate, "w2", true}},
  };
  // (mount, key) -> the path it names.
  const std::vector<std::pair<std::string, std::string>> pages = {
      {"/lake", "a/x.bin"},      {"/", "lake/a/x.bin"},   {"/lake/a", "x.bin"},
      {"/lake", "a2/x.bin"},     {"/lake", "ab"},         {"/lake", "a/ckpt/step-1.pt"},
      {"/lake", "a/ckpt2/s.pt"}, {"/lake", "b/y.bin"},    {"/lake", "c.bin"},
      {"/public", "p.bin"},      {"/publicity", "p.bin"}, {"/", "public"},
  };
  auto under = [](const std::string& path, const std::string& prefix) {
    return path == prefix || path.starts_with(prefix + "/");
  };
  auto may_read = [&](const std::string& who, const std::string& path, bool authenticated) {
    return (who == "team-a" && under(path, "/lake/a")) ||
           (who == "team-b" && under(path, "/lake/b")) || (authenticated && under(path, "/public"));
  };
  auto may_admin = [&](const std::string& who, const std::string& path) {
    return (who == "team-a" && under(path, "/lake/a/ckpt")) ||
           (who == "team-b" && under(path, "/lake/b")) || (who == "ops" && under(path, "/lake"));
  };
  enum class Kind { kRead, kAdmin, kPeer };
  auto make = [](int op, protocol::PageRef page) -> std::pair<protocol::Request, Kind> {
    switch (op) {
      case 0:
        return {With<protocol::ReadPageRequest>(page), Kind::kRead};
      case 1:
        return {With<protocol::LookupPageRequest>(page), Kind::kRead};
      case 2:
        return {With<protocol::ProbePageRequest>(page), Kind::kRead};
      case 3:
        return {With<protocol::LoadPageRequest>(page), Kind::kAdmin};
      case 4:
        return {With<protocol::DropPageRequest>(page), Kind::kAdmin};
      case 5:
        return {With<protocol::PeerReadRequest>(page), Kind::kPeer};
      default: {
        protocol::CopyFromPeerRequest copy;
        copy.page = page;
        copy.peer = "w3";
        return {copy, Kind::kPeer};
      }
    }
  };
  ConnectionAudit audit("matrix");
  int allowed = 0, denied = 0;
  for (const Who& who : principals) {
    for (const auto& [mount, key] : pages) {
      const std::string path = *RequestPath(Page(mount, key));
      for (int op = 0; op < 7; ++op) {
        auto [request, kind] = make(op, Page(mount, key));
        bool expected;
        if (who.id.cluster_node) {
          expected = true;
        } else if (kind == Kind::kPeer) {
          expected = false;
        } else if (kind == Kind::kRead) {
          expected = may_read(who.id.principal, path, !who.id.principal.empty());
        } else {
          expected = may_admin(who.id.principal, path);
        }
        Status verdict = authorizer.Check(who.id, request, &audit);
        EXPECT_EQ(verdict.ok(), expected) << who.name << " op " << op << " on " << mount << " + "
                                          << key << ": " << verdict.ToString();
        if (!verdict.ok()) {
          EXPECT_EQ(verdict.code(), StatusCode::kPermissionDenied) << verdict.ToString();
        }
        (verdict.ok() ? allowed : denied)++;
      }
    }
  }
  // The matrix exercises both outcomes broadly (not a policy that allows or denies all).
  EXPECT_GT(allowed, 100);
  EXPECT_GT(denied, 300);
}

}  // namespace
}  // namespace cairn::worker
