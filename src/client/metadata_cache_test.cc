#include "client/metadata_cache.h"

#include <gtest/gtest.h>

namespace cairn::client {
namespace {

TEST(MetadataCacheTest, ExpiresAfterTtlAndCachesNotFound) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  FileInfo info;
  info.name = "a";
  info.size = 3;
  cache.PutStat("/m/a", info, 1000);
  cache.PutStat("/m/missing", NotFoundError("gone"), 1000);
  ASSERT_TRUE(cache.GetStat("/m/a").has_value());
  EXPECT_EQ(cache.GetStat("/m/a")->value().size, 3u);
  EXPECT_EQ(cache.GetStat("/m/missing")->status().code(), StatusCode::kNotFound);
  clock.Advance(std::chrono::microseconds(1001));
  EXPECT_FALSE(cache.GetStat("/m/a").has_value());
  cache.PutStat("/m/zero", info, 0);  // TTL 0: never cached.
  EXPECT_FALSE(cache.GetStat("/m/zero").has_value());
}

TEST(MetadataCacheTest, InvalidateDropsPathAndBelowOnly) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  FileInfo info;
  cache.PutStat("/m/d/x", info, 1000000);
  cache.PutStat("/m/dx", info, 1000000);
  cache.PutList("/m/d", "", DirPage{}, 1000000);
  cache.Invalidate("/m/d");
  EXPECT_FALSE(cache.GetStat("/m/d/x").has_value());
  EXPECT_FALSE(cache.GetList("/m/d", "").has_value());
  EXPECT_TRUE(cache.GetStat("/m/dx").has_value());
}

TEST(MetadataCacheTest, BoundedByEntries) {
  FakeClock clock;
  MetadataCache cache(&clock, 10);
  FileInfo info;
  for (int i = 0; i < 50; ++i) cache.PutStat("/p" + std::to_string(i), info, 1000000);
  EXPECT_FALSE(cache.GetStat("/p0").has_value());
  EXPECT_TRUE(cache.GetStat("/p49").has_value());
}

}  // namespace
}  // namespace cairn::client
