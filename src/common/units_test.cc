#include "common/units.h"

#include <gtest/gtest.h>

namespace cairn {
namespace {

TEST(UnitsTest, ParsesSizes) {
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("64KiB"), 64u * 1024);
  EXPECT_EQ(*ParseBytes("1M"), 1u << 20);
  EXPECT_EQ(*ParseBytes("10 GiB"), 10ull << 30);
  EXPECT_EQ(*ParseBytes("2tb"), 2ull << 40);
}

TEST(UnitsTest, RejectsBadSizes) {
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("-1").ok());
  EXPECT_FALSE(ParseBytes("12XB").ok());
  EXPECT_FALSE(ParseBytes("99999999999999999999").ok());
  EXPECT_FALSE(ParseBytes("99999999999T").ok());
}

TEST(UnitsTest, ParsesDurations) {
  EXPECT_EQ(ParseDuration("500ms")->count(), 500000);
  EXPECT_EQ(ParseDuration("3")->count(), 3000000);
  EXPECT_EQ(ParseDuration("2m")->count(), 120000000);
  EXPECT_FALSE(ParseDuration("5 parsecs").ok());
}

TEST(UnitsTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

}  // namespace
}  // namespace cairn
