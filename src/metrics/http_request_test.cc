#include "metrics/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace cairn::metrics {
namespace {

using State = HeadParse::State;
constexpr size_t kMax = 1024;

TEST(HttpRequestTest, ParsesASimpleGet) {
  const std::string text = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\nNEXT";
  const HeadParse parse = ParseRequestHead(text, kMax);
  ASSERT_EQ(parse.state, State::kComplete) << parse.error;
  EXPECT_EQ(parse.request.method, "GET");
  EXPECT_EQ(parse.request.path, "/metrics");
  EXPECT_EQ(parse.request.minor_version, 1);
  EXPECT_TRUE(parse.request.keep_alive);
  EXPECT_EQ(parse.request.content_length, 0u);
  EXPECT_EQ(parse.head_size, text.size() - 4);  // "NEXT" belongs to the next request.
}

TEST(HttpRequestTest, NeedsMoreUntilTheBlankLine) {
  EXPECT_EQ(ParseRequestHead("", kMax).state, State::kIncomplete);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nHost: a\r\n", kMax).state, State::kIncomplete);
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nHost: a\r\n\r", kMax).state, State::kIncomplete);
}

TEST(HttpRequestTest, ToleratesBareLfAndLeadingBlankLines) {
  const HeadParse parse = ParseRequestHead("\r\n\nGET /healthz HTTP/1.0\nA: b\n\n", kMax);
  ASSERT_EQ(parse.state, State::kComplete) << parse.error;
  EXPECT_EQ(parse.request.path, "/healthz");
  EXPECT_EQ(parse.request.minor_version, 0);
  EXPECT_FALSE(parse.request.keep_alive);  // HTTP/1.0 closes by default.
}

TEST(HttpRequestTest, ConnectionHeaderDecidesKeepAlive) {
  EXPECT_FALSE(
      ParseRequestHead("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", kMax).request.keep_alive);
  EXPECT_FALSE(
      ParseRequestHead("GET / HTTP/1.1\r\nConnection: te, close\r\n\r\n", kMax).request.keep_alive);
  EXPECT_TRUE(ParseRequestHead("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", kMax)
                  .request.keep_alive);
}

TEST(HttpRequestTest, ReadsContentLengthAndTransferEncoding) {
  HeadParse parse =
      ParseRequestHead("POST /metrics HTTP/1.1\r\ncontent-length:  12 \r\n\r\n", kMax);
  ASSERT_EQ(parse.state, State::kComplete);
  EXPECT_EQ(parse.request.content_length, 12u);
  parse =
      ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", kMax);
  EXPECT_EQ(parse.state, State::kComplete);
  parse = ParseRequestHead("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", kMax);
  ASSERT_EQ(parse.state, State::kComplete);
  EXPECT_TRUE(parse.request.has_transfer_encoding);
}

TEST(HttpRequestTest, AcceptsAbsoluteFormTargets) {
  const HeadParse parse = ParseRequestHead("GET http://h:9/metrics HTTP/1.1\r\n\r\n", kMax);
  ASSERT_EQ(parse.state, State::kComplete);
  EXPECT_EQ(parse.request.path, "/metrics");
}

TEST(HttpRequestTest, RejectsMalformedHeads) {
  for (const char* text : {
           "GARBAGE\r\n\r\n",
           "GET /\r\n\r\n",
           "GET  / HTTP/1.1\r\n\r\n",
           "GET / HTTP/1.1 extra\r\n\r\n",
           "GET / HTTP/2.0\r\n\r\n",
           "GET / http/1.1\r\n\r\n",
           "GET metrics HTTP/1.1\r\n\r\n",
           "G(T / HTTP/1.1\r\n\r\n",
           "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
           "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
           "GET / HTTP/1.1\r\nName : x\r\n\r\n",
           "GET / HTTP/1.1\r\n: x\r\n\r\n",
           "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
           "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
       }) {
    EXPECT_EQ(ParseRequestHead(text, kMax).state, State::kMalformed) << text;
  }
}

TEST(HttpRequestTest, BoundsTheHeadSize) {
  std::string text = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  EXPECT_EQ(ParseRequestHead(text, text.size()).state, State::kComplete);
  EXPECT_EQ(ParseRequestHead(text, text.size() - 1).state, State::kTooLarge);
  // An unterminated head is too large as soon as it passes the limit...
  EXPECT_EQ(ParseRequestHead(std::string(kMax + 1, 'a'), kMax).state, State::kTooLarge);
  // ...and so is an endless run of blank lines.
  EXPECT_EQ(ParseRequestHead(std::string(kMax + 1, '\n'), kMax).state, State::kTooLarge);
  EXPECT_EQ(ParseRequestHead(std::string(kMax, 'a'), kMax).state, State::kIncomplete);
}

}  // namespace
}  // namespace cairn::metrics
