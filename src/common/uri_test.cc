#include "common/uri.h"

#include <gtest/gtest.h>

namespace cairn {
namespace {

TEST(UriTest, ParsesFileAndS3) {
  auto f = ParseUri("file:///data/set/");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->scheme, "file");
  EXPECT_EQ(f->path, "/data/set");
  auto s = ParseUri("S3://bucket/pre/fix/");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->scheme, "s3");
  EXPECT_EQ(s->authority, "bucket");
  EXPECT_EQ(s->path, "pre/fix");
  EXPECT_EQ(s->ToString(), "s3://bucket/pre/fix");
}

TEST(UriTest, RejectsMalformed) {
  EXPECT_FALSE(ParseUri("/no/scheme").ok());
  EXPECT_FALSE(ParseUri("file://relative").ok());
  EXPECT_FALSE(ParseUri("s3:///key").ok());
}

}  // namespace
}  // namespace cairn
