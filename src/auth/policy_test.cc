#include "auth/policy.h"

#include <gtest/gtest.h>

#include <random>

namespace cairn::auth {
namespace {

Identity Cert(std::string principal) {
  return Identity{Identity::Source::kCertificate, std::move(principal), false};
}
Identity Token(std::string principal) {
  return Identity{Identity::Source::kToken, std::move(principal), false};
}
constexpr AccessSet kRead = static_cast<AccessSet>(Access::kRead);
constexpr AccessSet kWrite = static_cast<AccessSet>(Access::kWrite);
constexpr AccessSet kAdmin = static_cast<AccessSet>(Access::kAdmin);

Policy Enabled(std::vector<Grant> grants) { return Policy{true, std::move(grants)}; }

TEST(PrefixCoversTest, MatchesOnSegmentBoundariesOnly) {
  EXPECT_TRUE(PrefixCovers("/data", "/data"));
  EXPECT_TRUE(PrefixCovers("/data", "/data/x/y"));
  EXPECT_FALSE(PrefixCovers("/data", "/data2"));
  EXPECT_FALSE(PrefixCovers("/data", "/data2/x"));
  EXPECT_FALSE(PrefixCovers("/data", "/dat"));
  EXPECT_FALSE(PrefixCovers("/data/x", "/data"));
  EXPECT_TRUE(PrefixCovers("/", "/anything"));
  EXPECT_TRUE(PrefixCovers("/", "/"));
  EXPECT_FALSE(PrefixCovers("/", ""));
}

TEST(PolicyTest, DisabledPolicyAllowsEveryone) {
  Policy p;
  EXPECT_TRUE(Authorize(p, Identity{}, "/lake/x", Access::kAdmin).ok());
  EXPECT_EQ(AccessOn(p, Identity{}, "/"), kAllAccess);
}

TEST(PolicyTest, EnabledPolicyDeniesByDefaultAndNamesTheMissingGrant) {
  Policy p = Enabled({{"team-a", "/lake/a", kRead}});
  EXPECT_TRUE(Authorize(p, Cert("team-a"), "/lake/a/x.bin", Access::kRead).ok());
  Status s = Authorize(p, Cert("team-a"), "/lake/a/x.bin", Access::kWrite);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "principal 'team-a' (certificate) has no write grant on /lake/a/x.bin");
  EXPECT_EQ(Authorize(p, Cert("team-b"), "/lake/a/x.bin", Access::kRead).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Authorize(p, Identity{}, "/lake/a/x.bin", Access::kRead).message(),
            "an anonymous client has no read grant on /lake/a/x.bin");
  // No grants at all: nobody gets anything.
  EXPECT_FALSE(Authorize(Enabled({}), Cert("root"), "/", Access::kRead).ok());
}

TEST(PolicyTest, PrefixLookAlikesAreNotCovered) {
  Policy p = Enabled({{"team-a", "/data", kRead}});
  EXPECT_TRUE(Authorize(p, Cert("team-a"), "/data/f", Access::kRead).ok());
  EXPECT_FALSE(Authorize(p, Cert("team-a"), "/data2/f", Access::kRead).ok());
  EXPECT_FALSE(Authorize(p, Cert("team-a"), "/dat", Access::kRead).ok());
}

TEST(PolicyTest, GrantsAddUpAndAdminDoesNotImplyRead) {
  Policy p = Enabled({{"ops", "/lake", kAdmin}, {"ops", "/lake/logs", kRead | kWrite}});
  EXPECT_EQ(AccessOn(p, Cert("ops"), "/lake/logs/1"), kRead | kWrite | kAdmin);
  EXPECT_EQ(AccessOn(p, Cert("ops"), "/lake/data"), kAdmin);
  EXPECT_FALSE(Authorize(p, Cert("ops"), "/lake/data", Access::kRead).ok());
}

TEST(PolicyTest, StarMeansAnyAuthenticatedPrincipalNeverAnonymous) {
  Policy p = Enabled({{"*", "/public", kRead}});
  EXPECT_TRUE(Authorize(p, Cert("anyone"), "/public/x", Access::kRead).ok());
  EXPECT_TRUE(Authorize(p, Token("job-7"), "/public/x", Access::kRead).ok());
  EXPECT_FALSE(Authorize(p, Identity{}, "/public/x", Access::kRead).ok());
}

TEST(PolicyTest, TokenAndCertificateOfOnePrincipalAreTheSamePrincipal) {
  Policy p = Enabled({{"team-a", "/a", kRead}});
  EXPECT_TRUE(Authorize(p, Token("team-a"), "/a/x", Access::kRead).ok());
  EXPECT_EQ(Authorize(p, Token("team-b"), "/a/x", Access::kRead).message(),
            "principal 'team-b' (token) has no read grant on /a/x");
}

TEST(PolicyIndexTest, AnswersExactlyAsTheLinearScan) {
  std::mt19937 rng(7);
  const std::vector<std::string> principals = {"a", "b", "c", "*"};
  const std::vector<std::string> paths = {"/", "/d", "/d/x", "/d/x/y", "/d2", "/e/f"};
  for (int round = 0; round < 200; ++round) {
    Policy p{rng() % 4 != 0, {}};
    for (int i = 0; i < 6; ++i) {
      Grant g{principals[rng() % principals.size()], paths[rng() % paths.size()],
              static_cast<AccessSet>(1 + rng() % 7)};
      bool dup = false;
      for (const Grant& h : p.grants) dup |= h.principal == g.principal && h.prefix == g.prefix;
      if (!dup) p.grants.push_back(g);
    }
    PolicyIndex index(p);
    for (const Identity& who : {Cert("a"), Token("b"), Cert("z"), Identity{}}) {
      for (const std::string& path : paths) {
        EXPECT_EQ(index.AccessOn(who, path), AccessOn(p, who, path)) << who.Describe() << path;
        Status a = index.Authorize(who, path, Access::kWrite);
        Status b = Authorize(p, who, path, Access::kWrite);
        EXPECT_EQ(a.code(), b.code());
        EXPECT_EQ(a.message(), b.message());
      }
    }
  }
}

TEST(VisibilityTest, ReadOnTheDirectoryShowsEverything) {
  PolicyIndex index(Enabled({{"team-a", "/lake", kRead}}));
  auto v = index.VisibleIn(Cert("team-a"), "/lake/sub");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->everything);
  EXPECT_TRUE(v->Shows("anything"));
  EXPECT_TRUE(PolicyIndex(Policy{}).VisibleIn(Identity{}, "/").value().everything);
}

TEST(VisibilityTest, WithoutReadOnlyTheWayDownToOwnReadGrantsShows) {
  PolicyIndex index(Enabled({{"team-a", "/lake/a", kRead},
                             {"team-a", "/lake/deep/x/y", kRead},
                             {"team-a", "/lake/w", kWrite | kAdmin},  // No read: not shown.
                             {"team-b", "/lake/b", kRead},            // Another team's.
                             {"*", "/lake/public", kRead},
                             {"team-a", "/other", kRead}}));
  auto v = index.VisibleIn(Token("team-a"), "/lake");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(v->everything);
  EXPECT_EQ(v->children, (std::vector<std::string>{"a", "deep", "public"}));
  EXPECT_TRUE(v->Shows("a"));
  EXPECT_FALSE(v->Shows("a2"));  // A look-alike of a granted name.
  EXPECT_FALSE(v->Shows("b"));
  EXPECT_FALSE(v->Shows("w"));
  EXPECT_EQ(index.VisibleIn(Token("team-a"), "/lake/deep").value().children,
            (std::vector<std::string>{"x"}));
  EXPECT_EQ(index.VisibleIn(Token("team-a"), "/").value().children,
            (std::vector<std::string>{"lake", "other"}));
  // A look-alike of the directory is not on the way to /lake/a.
  auto look_alike = index.VisibleIn(Token("team-a"), "/la");
  EXPECT_EQ(look_alike.status().code(), StatusCode::kPermissionDenied);
  auto other = index.VisibleIn(Token("team-c"), "/lake");  // Only the "*" grant.
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->children, (std::vector<std::string>{"public"}));
}

TEST(VisibilityTest, NothingVisibleIsRefusedAndAnonymousSeesNothing) {
  PolicyIndex index(Enabled({{"*", "/lake/public", kRead}, {"team-a", "/lake/w", kWrite}}));
  auto anonymous = index.VisibleIn(Identity{}, "/lake");
  EXPECT_EQ(anonymous.status().code(), StatusCode::kPermissionDenied);
  auto writer = index.VisibleIn(Cert("team-a"), "/lake/w");
  EXPECT_EQ(writer.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(writer.status().message().find("no read grant on /lake/w or below it"),
            std::string::npos)
      << writer.status().message();
  // Below a shown name but outside the grant: refused.
  EXPECT_EQ(index.VisibleIn(Cert("team-a"), "/lake/publicity").status().code(),
            StatusCode::kPermissionDenied);
}

TEST(PolicyTest, AccessSetsParseAndPrint) {
  EXPECT_EQ(*ParseAccessSet("read"), kRead);
  EXPECT_EQ(*ParseAccessSet("read,admin"), kRead | kAdmin);
  EXPECT_EQ(*ParseAccessSet("all"), kAllAccess);
  EXPECT_FALSE(ParseAccessSet("").ok());
  EXPECT_FALSE(ParseAccessSet("read,").ok());
  EXPECT_FALSE(ParseAccessSet("execute").ok());
  EXPECT_EQ(AccessSetName(kRead | kWrite), "read,write");
  EXPECT_EQ(AccessSetName(0), "none");
}

TEST(PolicyTest, ValidationRefusesBadGrants) {
  EXPECT_TRUE(ValidatePolicy(Enabled({{"a", "/", kRead}, {"*", "/x/y", kAdmin}})).ok());
  for (const char* prefix : {"", "x", "/x/", "/x//y", "/x/../y", "/x/./y"}) {
    EXPECT_FALSE(ValidatePolicy(Enabled({{"a", prefix, kRead}})).ok()) << prefix;
  }
  for (const char* principal : {"", "a b", "a/b", "a\nb"}) {
    EXPECT_FALSE(ValidatePolicy(Enabled({{principal, "/x", kRead}})).ok()) << principal;
  }
  EXPECT_FALSE(ValidatePolicy(Enabled({{std::string(129, 'a'), "/x", kRead}})).ok());
  EXPECT_FALSE(ValidatePolicy(Enabled({{"a", "/x", 0}})).ok());
  EXPECT_FALSE(ValidatePolicy(Enabled({{"a", "/x", 8}})).ok());
  EXPECT_FALSE(ValidatePolicy(Enabled({{"a", "/x", kRead}, {"a", "/x", kWrite}})).ok());
}

}  // namespace
}  // namespace cairn::auth
