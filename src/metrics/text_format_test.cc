#include "metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace cairn::metrics {
namespace {

std::string Double(double v) {
  std::string out;
  AppendDouble(v, &out);
  return out;
}

TEST(TextFormatTest, EscapesHelp) {
  std::string out;
  AppendEscapedHelp("a\\b\nc\"d", &out);
  EXPECT_EQ(out, "a\\\\b\\nc\"d");  // Quotes are not escaped in HELP.
}

TEST(TextFormatTest, EscapesLabelValues) {
  std::string out;
  AppendEscapedLabelValue("a\\b\nc\"d", &out);
  EXPECT_EQ(out, "a\\\\b\\nc\\\"d");
}

TEST(TextFormatTest, FormatsNumbers) {
  EXPECT_EQ(Double(0), "0");
  EXPECT_EQ(Double(3), "3");
  EXPECT_EQ(Double(-2.5), "-2.5");
  EXPECT_EQ(Double(0.1), "0.1");
  EXPECT_EQ(Double(1e-5), "1e-05");
  EXPECT_EQ(Double(1e12), "1000000000000");
  EXPECT_EQ(Double(-4096), "-4096");
  EXPECT_EQ(Double(1e20), "1e+20");
  EXPECT_EQ(Double(-0.0), "-0");
  EXPECT_EQ(Double(INFINITY), "+Inf");
  EXPECT_EQ(Double(-INFINITY), "-Inf");
  EXPECT_EQ(Double(NAN), "NaN");
  EXPECT_EQ(std::stod(Double(0.1 + 0.2)), 0.1 + 0.2);  // Round-trips exactly.
  std::string out;
  AppendUint(18446744073709551615ULL, &out);
  EXPECT_EQ(out, "18446744073709551615");
}

TEST(TextFormatTest, ValidatesNames) {
  EXPECT_TRUE(IsValidMetricName("cairn_reads_total"));
  EXPECT_TRUE(IsValidMetricName("job:rate:5m"));
  EXPECT_TRUE(IsValidMetricName("_x9"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9x"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));

  EXPECT_TRUE(IsValidLabelName("op"));
  EXPECT_TRUE(IsValidLabelName("_op2"));
  EXPECT_FALSE(IsValidLabelName(""));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("2a"));
}

}  // namespace
}  // namespace cairn::metrics
