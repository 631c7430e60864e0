#include "membership/etcd_json.h"

#include <gtest/gtest.h>

namespace cairn::membership::etcd {
namespace {

TEST(EtcdJsonTest, Base64RoundTripsArbitraryBytes) {
  for (std::string s : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                        std::string("\0\xff\x01 /cairn", 10)}) {
    StatusOr<std::string> back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("a"), "YQ==");
}

TEST(EtcdJsonTest, Base64RejectsGarbage) {
  EXPECT_FALSE(Base64Decode("abc").ok());
  EXPECT_FALSE(Base64Decode("a!c=").ok());
}

TEST(EtcdJsonTest, PrefixRangeEndIncrementsTheLastByte) {
  EXPECT_EQ(PrefixRangeEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd("\xff"), std::string(1, '\0'));
}

TEST(EtcdJsonTest, Int64FieldAcceptsStringsNumbersAndAbsence) {
  nlohmann::json j = {{"s", "42"}, {"n", 7}, {"bad", "x1"}};
  EXPECT_EQ(*Int64Field(j, "s"), 42);
  EXPECT_EQ(*Int64Field(j, "n"), 7);
  EXPECT_EQ(*Int64Field(j, "absent"), 0);
  EXPECT_FALSE(Int64Field(j, "bad").ok());
}

TEST(EtcdJsonTest, ErrorRepliesMapToStatusCodes) {
  EXPECT_EQ(ErrorReplyToStatus(404, R"({"error":"x","code":5,"message":"lease not found"})", "c")
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ErrorReplyToStatus(400, R"({"code":11,"message":"compacted"})", "c").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrorReplyToStatus(503, R"({"code":14,"message":"no leader"})", "c").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(ErrorReplyToStatus(502, "<html>", "c").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrorReplyToStatus(400, "junk", "c").code(), StatusCode::kInternal);
}

TEST(EtcdJsonTest, DecodesEventsAsTheGatewayWritesThem) {
  auto put = nlohmann::json::parse(
      R"({"kv":{"key":"YQ==","create_revision":"4","mod_revision":"4","version":"1","value":"Yw=="}})");
  StatusOr<WatchEvent> e = DecodeEvent(put);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->type, EventType::kPut);
  EXPECT_EQ(e->key, "a");
  EXPECT_EQ(e->value, "c");
  EXPECT_EQ(e->mod_revision, 4);
  auto del = nlohmann::json::parse(R"({"type":"DELETE","kv":{"key":"YQ==","mod_revision":"5"}})");
  e = DecodeEvent(del);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->type, EventType::kDelete);
  EXPECT_EQ(e->mod_revision, 5);
  EXPECT_FALSE(DecodeEvent(nlohmann::json::parse(R"({"kv":{"key":"***"}})")).ok());
}

}  // namespace
}  // namespace cairn::membership::etcd
