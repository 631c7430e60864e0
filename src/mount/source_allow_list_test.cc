#include "mount/source_allow_list.h"

#include <gtest/gtest.h>

namespace cairn::mount {
namespace {

MountSpec Spec(std::string uri, std::string endpoint = "") {
  MountSpec m;
  m.path = "/m";
  m.uri = std::move(uri);
  if (!endpoint.empty()) m.options["endpoint"] = std::move(endpoint);
  return m;
}

TEST(SourceAllowListTest, EmptyListsAllowEverything) {
  SourceAllowList open;
  EXPECT_FALSE(open.restricts_sources());
  EXPECT_TRUE(open.Check(Spec("file:///", "http://anywhere:1")).ok());
}

TEST(SourceAllowListTest, SourcesArePrefixesOnSegmentBoundaries) {
  auto list =
      SourceAllowList::Create({"s3://bucket-a", "s3://bucket-b/team", "file:///srv/lake/"}, {});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  for (const char* ok : {"s3://bucket-a", "s3://bucket-a/x/y", "s3://bucket-b/team",
                         "s3://bucket-b/team/set", "file:///srv/lake", "file:///srv/lake/x"}) {
    EXPECT_TRUE(list->Check(Spec(ok)).ok()) << ok;
  }
  for (const char* bad :
       {"s3://bucket-b", "s3://bucket-b/team2", "s3://bucket-c", "file:///srv/lake2", "file:///",
        "file:///srv/lake/../../etc", "file:///etc", "s3://bucket-a/../x"}) {
    Status s = list->Check(Spec(bad));
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << bad;
  }
  EXPECT_NE(list->Check(Spec("file:///etc")).message().find("--allow-source"), std::string::npos);
}

TEST(SourceAllowListTest, EndpointsMustBeListedWhenTheListIsSet) {
  auto list = SourceAllowList::Create({}, {"http://10.0.0.9:9000/"});
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->Check(Spec("s3://b")).ok()) << "the default endpoint needs no entry";
  EXPECT_TRUE(list->Check(Spec("s3://b", "http://10.0.0.9:9000")).ok());
  Status s = list->Check(Spec("s3://b", "http://evil.example:80"));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("--allow-endpoint"), std::string::npos);
}

TEST(SourceAllowListTest, BadEntriesAreRefused) {
  EXPECT_FALSE(SourceAllowList::Create({"bucket-a"}, {}).ok());
  EXPECT_FALSE(SourceAllowList::Create({"gs://bucket"}, {}).ok());
  EXPECT_FALSE(SourceAllowList::Create({"file://relative"}, {}).ok());
  EXPECT_FALSE(SourceAllowList::Create({"file:///srv/../etc"}, {}).ok());
  EXPECT_FALSE(SourceAllowList::Create({}, {"10.0.0.9:9000"}).ok());
}

}  // namespace
}  // namespace cairn::mount
