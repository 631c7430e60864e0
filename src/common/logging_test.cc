#include "common/logging.h"

#include <gtest/gtest.h>

#include <string>

namespace cairn {
namespace {

std::string Format(std::string_view message) {
  auto formatter = MakeLogFormatter("%L %v");
  spdlog::details::log_msg msg("cairn", spdlog::level::warn,
                               spdlog::string_view_t(message.data(), message.size()));
  spdlog::memory_buf_t out;
  formatter->format(msg, out);
  return std::string(out.data(), out.size());
}

TEST(LoggingTest, ANameFromAPeerCannotForgeALogLine) {
  // A key sent by a peer, logged inside a message: the forged "E ..." must stay on the
  // warning's line, with its control characters visible.
  std::string line =
      Format("bad page key 'x\n2026-12-01T00:00:00.000 E [1] worker compromised\r\x1b[0m'");
  EXPECT_EQ(line,
            "W bad page key 'x\\n2026-12-01T00:00:00.000 E [1] worker compromised\\r\\x1b[0m'\n");
  EXPECT_EQ(Format("plain message, tab\there"), "W plain message, tab\\there\n");
  EXPECT_EQ(Format("ünïcödé stays"), "W ünïcödé stays\n");
  auto clone = MakeLogFormatter("%v")->clone();
  spdlog::details::log_msg msg("cairn", spdlog::level::info, "a\nb");
  spdlog::memory_buf_t out;
  clone->format(msg, out);
  EXPECT_EQ(std::string(out.data(), out.size()), "a\\nb\n");
}

}  // namespace

TEST(PrintableTest, ReplacesControlAndNonAsciiBytesAndBoundsTheLength) {
  EXPECT_EQ(Printable("ok: /metrics"), "ok: /metrics");
  EXPECT_EQ(Printable("a\nb\x1b[0m\xc3\xa9"), "a?b?[0m??");
  EXPECT_EQ(Printable(std::string(500, 'x')).size(), 200u);
  EXPECT_EQ(Printable("abcdef", 3), "abc");
}

}  // namespace cairn
