#include "membership/etcd_json.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "membership/etcd_coordination.h"
#include "ufs/fake_http_server.h"

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
  EXPECT_EQ(
      ErrorReplyToStatus(404, R"({"error":"x","code":5,"message":"lease not found"})", "c").code(),
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

// Found by fuzzing: these replies made nlohmann throw type_error out of the module
// (std::terminate) or convert a double to int64 (undefined behaviour).
TEST(EtcdJsonTest, TxnReplyOfTheWrongShapeIsAnError) {
  auto txn = [](const char* body) { return DecodeTxnSucceeded(nlohmann::json::parse(body)); };
  EXPECT_EQ(txn(R"({"succeeded":"yes"})").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(txn(R"({"succeeded":1})").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(txn(R"({"succeeded":null})").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(*txn(R"({"succeeded":true})"));
  EXPECT_FALSE(*txn(R"({"succeeded":false})"));
  EXPECT_FALSE(*txn(R"({"header":{"revision":"3"}})"));  // proto3 omits false.
}

TEST(EtcdJsonTest, WatchMessagesOfTheWrongShapeAreErrors) {
  for (const char* line : {
           R"({"result":{"created":"x"}})",
           R"({"result":1})",
           R"({"result":"x"})",
           R"({"result":[]})",
           R"({"result":{"canceled":"no"}})",
           R"({"result":{"cancel_reason":5}})",
           R"({"result":{"compact_revision":"x"}})",
           R"({"result":{"compact_revision":1e300}})",
           R"({"result":{"header":5}})",
           R"({"result":{"header":{"revision":"9223372036854775807"}}})",
           R"({"result":{"header":{"revision":"-2"}}})",
           R"({"result":{"events":{}}})",
           R"({"result":{"events":[1]}})",
           R"({"result":{"events":[{"kv":5}]}})",
           R"({"result":{"events":[{"type":7,"kv":{"key":"YQ=="}}]}})",
           R"({"result":{"events":[{"kv":{"key":5}}]}})",
           R"({"result":{"events":[{"kv":{"key":"YQ==","value":[]}}]}})",
           R"({"result":{"events":[{"kv":{"key":"YQ==","mod_revision":3.5}}]}})",
           R"({"result":{"events":[{"kv":{"key":"YQ==","mod_revision":"9223372036854775807"}}]}})",
           R"([1,2])",
           "not json",
           "",
       }) {
    StatusOr<WatchMessage> m = DecodeWatchMessage(line);
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << line;
  }
}

TEST(EtcdJsonTest, DecodesWatchMessagesAsTheGatewayWritesThem) {
  StatusOr<WatchMessage> created = DecodeWatchMessage(
      R"({"result":{"header":{"cluster_id":"1","revision":"7"},"created":true}})");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(created->created);
  EXPECT_EQ(created->header_revision, 7);
  EXPECT_FALSE(created->error);

  StatusOr<WatchMessage> events = DecodeWatchMessage(
      R"({"result":{"header":{"revision":"9"},"events":[{"kv":{"key":"YQ==","mod_revision":"8"}},)"
      R"({"type":"DELETE","kv":{"key":"Yg==","mod_revision":"9"}}]}})");
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->events.size(), 2u);
  EXPECT_EQ(events->events[0].key, "a");
  EXPECT_EQ(events->events[1].type, EventType::kDelete);

  StatusOr<WatchMessage> cancelled = DecodeWatchMessage(
      R"({"result":{"canceled":true,"compact_revision":"12","cancel_reason":"compacted"}})");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_TRUE(cancelled->canceled);
  EXPECT_EQ(cancelled->compact_revision, 12);
  EXPECT_EQ(cancelled->cancel_reason, "compacted");

  StatusOr<WatchMessage> error = DecodeWatchMessage(R"({"error":{"grpc_code":14}})");
  ASSERT_TRUE(error.ok());
  ASSERT_TRUE(error->error);
  EXPECT_NE(error->error->find("14"), std::string::npos);
}

TEST(EtcdJsonTest, RangeRepliesOfTheWrongShapeAreErrors) {
  for (const char* body : {
           R"({"kvs":{}})",
           R"({"kvs":[1]})",
           R"({"kvs":[{"key":5}]})",
           R"({"kvs":[{"key":"YQ==","create_revision":{}}]})",
           R"({"header":{"revision":1.5}})",
           R"({"header":[]})",
       }) {
    EXPECT_EQ(DecodeRangeReply(nlohmann::json::parse(body)).status().code(),
              StatusCode::kInvalidArgument)
        << body;
  }
  StatusOr<RangeResult> ok = DecodeRangeReply(nlohmann::json::parse(
      R"({"header":{"revision":"5"},"kvs":[{"key":"YQ==","value":"Yw==","mod_revision":"4"}]})"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->revision, 5);
  ASSERT_EQ(ok->entries.size(), 1u);
  EXPECT_EQ(ok->entries[0].value, "c");
  EXPECT_TRUE(DecodeRangeReply(nlohmann::json::parse(R"({"header":{}})"))->entries.empty());
  EXPECT_EQ(ParseReply("[]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseReply("{").status().code(), StatusCode::kInvalidArgument);
}

TEST(EtcdJsonTest, Int64FieldRefusesFloatsAndOutOfRangeIntegers) {
  nlohmann::json j = nlohmann::json::parse(
      R"({"huge":3.6e76,"frac":1.5,"big":18446744073709551615,"max":"9223372036854775807",)"
      R"("over":"9223372036854775808","neg":-3})");
  EXPECT_FALSE(Int64Field(j, "huge").ok());
  EXPECT_FALSE(Int64Field(j, "frac").ok());
  EXPECT_FALSE(Int64Field(j, "big").ok());
  EXPECT_EQ(*Int64Field(j, "max"), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(Int64Field(j, "over").ok());
  EXPECT_EQ(*Int64Field(j, "neg"), -3);
}

TEST(EtcdJsonTest, ErrorReplyCodesAreNotNarrowed) {
  // 4294967301 narrowed to int would be 5 (NotFound).
  EXPECT_EQ(ErrorReplyToStatus(400, R"({"code":4294967301,"message":"m"})", "c").code(),
            StatusCode::kInternal);
  EXPECT_EQ(ErrorReplyToStatus(400, R"({"code":5.0,"message":7})", "c").code(),
            StatusCode::kInternal);
  EXPECT_EQ(ErrorReplyToStatus(503, R"({"code":"14"})", "c").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrorReplyToStatus(503, R"({"code":99})", "c").code(), StatusCode::kInternal);
}

// Every field any decoder reads, given every JSON type: an error or a value, never a throw.
TEST(EtcdJsonTest, DecodersNeverThrowWhateverTheFieldTypes) {
  const std::vector<std::string> values = {
      "1", "-1", "1.5", "3.6e76", "18446744073709551615", "\"x\"", "true", "null", "[]", "{}"};
  const std::vector<std::string> templates = {
      R"({"succeeded":V})",
      R"({"header":V})",
      R"({"header":{"revision":V}})",
      R"({"kvs":V})",
      R"({"kvs":[V]})",
      R"({"kvs":[{"key":V}]})",
      R"({"kvs":[{"key":"YQ==","value":V}]})",
      R"({"kvs":[{"key":"YQ==","lease":V}]})",
      R"({"result":V})",
      R"({"result":{"created":V}})",
      R"({"result":{"canceled":V}})",
      R"({"result":{"cancel_reason":V}})",
      R"({"result":{"compact_revision":V}})",
      R"({"result":{"events":V}})",
      R"({"result":{"events":[V]}})",
      R"({"result":{"events":[{"type":V,"kv":{}}]}})",
      R"({"result":{"events":[{"kv":V}]}})",
      R"({"error":V})",
      R"({"code":V,"message":V})",
  };
  for (const std::string& t : templates) {
    for (const std::string& v : values) {
      std::string doc = t;
      for (size_t at; (at = doc.find('V')) != std::string::npos;) doc.replace(at, 1, v);
      SCOPED_TRACE(doc);
      nlohmann::json j = nlohmann::json::parse(doc);
      (void)DecodeTxnSucceeded(j);
      (void)HeaderRevision(j);
      (void)DecodeRangeReply(j);
      (void)DecodeWatchMessage(doc);
      (void)ErrorReplyToStatus(400, doc, "c");
    }
  }
}

TEST(EtcdJsonTest, AppendWithinLimitRefusesWhatWouldNotFit) {
  std::string body;
  EXPECT_TRUE(AppendWithinLimit(&body, "abc", 4));
  EXPECT_TRUE(AppendWithinLimit(&body, "d", 4));
  EXPECT_FALSE(AppendWithinLimit(&body, "e", 4));
  EXPECT_EQ(body, "abcd");
  EXPECT_FALSE(AppendWithinLimit(&body, "abcde", 4));
}

TEST(EtcdJsonTest, LineSplitterJoinsChunksAndRefusesLongLines) {
  LineSplitter lines(8);
  ASSERT_TRUE(lines.Append("ab").ok());
  EXPECT_FALSE(lines.NextLine());
  ASSERT_TRUE(lines.Append("c\n12345678\nx").ok());
  EXPECT_EQ(lines.NextLine(), "abc");
  EXPECT_EQ(lines.NextLine(), "12345678");  // Exactly the limit.
  EXPECT_FALSE(lines.NextLine());
  ASSERT_TRUE(lines.Append("y\n").ok());
  EXPECT_EQ(lines.NextLine(), "xy");
  // An unfinished line past the limit, fed a byte at a time.
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(lines.Append("z").ok());
  EXPECT_EQ(lines.Append("z").code(), StatusCode::kResourceExhausted);
  // A complete line past the limit in one chunk.
  lines.Clear();
  EXPECT_EQ(lines.Append("ok\n123456789\n").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(lines.NextLine(), "ok");  // Lines before the long one are still whole.
  EXPECT_FALSE(lines.NextLine());
  lines.Clear();
  ASSERT_TRUE(lines.Append("\n\n").ok());
  EXPECT_EQ(lines.NextLine(), "");
  EXPECT_EQ(lines.NextLine(), "");
  EXPECT_FALSE(lines.NextLine());
}

// End to end: EtcdCoordination against a fake gateway that sends malformed replies.
class EtcdMalformedReplyTest : public ::testing::Test {
 protected:
  // Serves `replies[path]` (a 200 JSON body) for each request path.
  void Serve(std::map<std::string, std::string> replies) {
    auto server = ufs::testing::FakeHttpServer::Start(
        [replies = std::move(replies)](const ufs::testing::RecordedRequest& r) {
          auto it = replies.find(r.path);
          if (it == replies.end()) return ufs::testing::FakeHttpServer::Response(404, {}, "");
          return ufs::testing::FakeHttpServer::Response(200, {{"Content-Type", "application/json"}},
                                                        it->second);
        });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  std::unique_ptr<EtcdCoordination> Connect(EtcdOptions o = {}) {
    o.endpoints = server_->endpoint();
    o.connect_timeout_ms = 1000;
    o.request_timeout_ms = 3000;
    auto coord = EtcdCoordination::Create(o);
    EXPECT_TRUE(coord.ok());
    return coord.ok() ? std::move(coord).value() : nullptr;
  }

  std::unique_ptr<ufs::testing::FakeHttpServer> server_;
};

TEST_F(EtcdMalformedReplyTest, CompareAndSwapWithANonBoolSucceededIsInternal) {
  Serve({{"/v3/kv/txn", R"({"header":{"revision":"5"},"succeeded":"yes"})"}});
  auto coord = Connect();
  ASSERT_NE(coord, nullptr);
  StatusOr<int64_t> r = coord->CompareAndSwap("/k", 0, "v");
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().message().find("succeeded"), std::string::npos) << r.status().ToString();
}

TEST_F(EtcdMalformedReplyTest, WellFormedCompareAndSwapStillWorks) {
  Serve({{"/v3/kv/txn", R"({"header":{"revision":"5"},"succeeded":true})"}});
  auto coord = Connect();
  ASSERT_NE(coord, nullptr);
  StatusOr<int64_t> r = coord->CompareAndSwap("/k", 0, "v");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 5);
}

TEST_F(EtcdMalformedReplyTest, MalformedRangeRepliesAreInternal) {
  Serve({{"/v3/kv/range", R"({"header":{"revision":"5"},"kvs":[{"key":5}]})"}});
  auto coord = Connect();
  ASSERT_NE(coord, nullptr);
  EXPECT_EQ(coord->Get("/k").status().code(), StatusCode::kInternal);
  EXPECT_EQ(coord->GetPrefix("/k").status().code(), StatusCode::kInternal);
}

TEST_F(EtcdMalformedReplyTest, ARangeReplyOverTheCapIsRefused) {
  std::string big =
      R"({"header":{"revision":"5"},"kvs":[{"key":")" + std::string(4000, 'A') + R"("}]})";
  Serve({{"/v3/kv/range", big}});
  EtcdOptions o;
  o.max_reply_bytes = 1024;
  auto coord = Connect(o);
  ASSERT_NE(coord, nullptr);
  StatusOr<RangeResult> r = coord->GetPrefix("/k");
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
}

TEST_F(EtcdMalformedReplyTest, AWatchWhoseCreationReplyIsMalformedFailsToStart) {
  for (const char* reply :
       {R"({"result":{"header":{"revision":"1"},"created":"x"}})", R"({"result":1})"}) {
    Serve({{"/v3/watch", std::string(reply) + "\n"}});
    auto coord = Connect();
    ASSERT_NE(coord, nullptr);
    StatusOr<std::unique_ptr<WatchHandle>> w =
        coord->Watch("/k", 0, [](const WatchUpdate&) { ADD_FAILURE() << "no update expected"; });
    EXPECT_EQ(w.status().code(), StatusCode::kInternal) << reply << ": " << w.status().ToString();
  }
}

// Collects watch updates for the test thread.
class UpdateLog {
 public:
  WatchCallback Callback() {
    return [this](const WatchUpdate& u) {
      MutexLock lock(&mu_);
      updates_.push_back(u);
      cv_.NotifyAll();
    };
  }
  // The final (non-OK) update, waiting up to 10 s; OK if none came.
  Status WaitFinal() {
    MutexLock lock(&mu_);
    cv_.WaitFor(&mu_, std::chrono::seconds(10),
                [&]() REQUIRES(mu_) { return !updates_.empty() && !updates_.back().status.ok(); });
    return updates_.empty() ? Status::Ok() : updates_.back().status;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<WatchUpdate> updates_ GUARDED_BY(mu_);
};

TEST_F(EtcdMalformedReplyTest, AMalformedWatchMessageEndsTheWatchWithAFinalError) {
  Serve({{"/v3/watch",
          "{\"result\":{\"header\":{\"revision\":\"1\"},\"created\":true}}\n"
          "{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\"},\"type\":1}]}}\n"}});
  auto coord = Connect();
  ASSERT_NE(coord, nullptr);
  UpdateLog log;
  StatusOr<std::unique_ptr<WatchHandle>> w = coord->Watch("/k", 0, log.Callback());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(log.WaitFinal().code(), StatusCode::kInternal);
}

TEST_F(EtcdMalformedReplyTest, AWatchLineOverTheCapEndsTheWatch) {
  Serve({{"/v3/watch", "{\"result\":{\"header\":{\"revision\":\"1\"},\"created\":true}}\n" +
                           std::string(4096, ' ')}});
  EtcdOptions o;
  o.max_watch_line_bytes = 1024;
  auto coord = Connect(o);
  ASSERT_NE(coord, nullptr);
  UpdateLog log;
  StatusOr<std::unique_ptr<WatchHandle>> w = coord->Watch("/k", 0, log.Callback());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(log.WaitFinal().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace cairn::membership::etcd
