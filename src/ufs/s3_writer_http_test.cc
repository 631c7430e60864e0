// S3UnderStorage's writer against a scripted fake server: what it puts on the wire (Content-MD5,
// conditional headers, part numbers, the completion document), answers real servers give that
// are hard to provoke (a 200 carrying an <Error>, a commit whose reply is lost, a 412), and abort.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "ufs/fake_http_server.h"
#include "ufs/retrying_ufs.h"
#include "ufs/s3_digest.h"
#include "ufs/s3_ufs.h"

namespace cairn::ufs {
namespace {

using testing::FakeHttpServer;
using testing::RecordedRequest;

constexpr uint64_t kPart = 5 << 20;

std::span<const char> Span(const std::string& s) { return {s.data(), s.size()}; }

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// A bucket with one key's worth of state: enough S3 for one writer.
class FakeS3 {
 public:
  // What the next CompleteMultipartUpload does besides completing.
  enum class OnComplete { kAnswer, kLoseReply, kErrorIn200 };

  std::string Handle(const RecordedRequest& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.method == "HEAD") {
      if (etag_.empty()) return FakeHttpServer::Response(404, {}, "", /*head=*/true);
      return FakeHttpServer::Response(200, {{"ETag", Quoted(etag_)}}, std::string(size_, 'x'),
                                      /*head=*/true);
    }
    if (r.method == "POST" && r.query == "uploads=") {
      return FakeHttpServer::Response(200, {},
                                      "<InitiateMultipartUploadResult><UploadId>UP1</UploadId>"
                                      "</InitiateMultipartUploadResult>");
    }
    if (r.method == "PUT" && r.query.find("uploadId=UP1") != std::string::npos) {
      if (part_status_ != 200) return Answer(part_status_);
      const std::string md5 = s3::Hex(s3::Md5(Span(r.body)));
      parts_[r.query] = {md5, r.body.size()};
      return FakeHttpServer::Response(200, {{"ETag", Quoted(md5)}}, "");
    }
    if (r.method == "POST" && r.query == "uploadId=UP1") {
      if (on_complete_ == OnComplete::kErrorIn200) {
        on_complete_ = OnComplete::kAnswer;
        return FakeHttpServer::Response(
            200, {}, "<Error><Code>InternalError</Code><Message>retry</Message></Error>");
      }
      std::vector<s3::Md5Digest> md5s;
      size_ = 0;
      for (const auto& [query, part] : parts_) {
        size_ += part.second;
        s3::Md5Digest d{};
        for (size_t i = 0; i < 16; ++i) d[i] = std::stoi(part.first.substr(2 * i, 2), nullptr, 16);
        md5s.push_back(d);
      }
      etag_ = s3::MultipartETag(md5s);
      ++completions_;
      if (on_complete_ == OnComplete::kLoseReply) {
        on_complete_ = OnComplete::kAnswer;
        return FakeHttpServer::Response(502, {}, "bad gateway");  // Committed all the same.
      }
      return FakeHttpServer::Response(200, {},
                                      "<CompleteMultipartUploadResult><ETag>" + Quoted(etag_) +
                                          "</ETag></CompleteMultipartUploadResult>");
    }
    if (r.method == "DELETE" && r.query == "uploadId=UP1") {
      ++aborts_;
      return FakeHttpServer::Response(204, {}, "");
    }
    if (r.method == "PUT") {
      int status = put_status_;
      if (!put_script_.empty()) {
        status = put_script_.front();
        put_script_.erase(put_script_.begin());
      }
      if (status != 200) return Answer(status);
      etag_ = s3::Hex(s3::Md5(Span(r.body)));
      size_ = r.body.size();
      return FakeHttpServer::Response(200, {{"ETag", Quoted(etag_)}}, "");
    }
    return FakeHttpServer::Response(400, {}, "unexpected " + r.method + " " + r.query);
  }

  void set_on_complete(OnComplete c) {
    std::lock_guard<std::mutex> lock(mu_);
    on_complete_ = c;
  }
  // How PUTs of whole objects (and UploadParts) are answered: an HTTP status, or 0 to drop the
  // connection once the request arrived (nothing is stored but by a 200).
  void set_put_status(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    put_status_ = s;
  }
  // The next PUTs of whole objects, in turn; then set_put_status's.
  void script_puts(std::vector<int> statuses) {
    std::lock_guard<std::mutex> lock(mu_);
    put_script_ = std::move(statuses);
  }
  void set_part_status(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    part_status_ = s;
  }
  int completions() {
    std::lock_guard<std::mutex> lock(mu_);
    return completions_;
  }
  int aborts() {
    std::lock_guard<std::mutex> lock(mu_);
    return aborts_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<std::string, size_t>> parts_;  // query -> (md5 hex, size)
  std::string etag_;                                             // Of the object; "" = none.
  size_t size_ = 0;
  static std::string Answer(int status) {
    return status == 0 ? "" : FakeHttpServer::Response(status, {}, "");
  }

  OnComplete on_complete_ = OnComplete::kAnswer;
  int put_status_ = 200;
  std::vector<int> put_script_;
  int part_status_ = 200;
  int completions_ = 0;
  int aborts_ = 0;
};

class S3WriterHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server =
        FakeHttpServer::Start([this](const RecordedRequest& r) { return fake_.Handle(r); });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    UfsOptions o;
    o.endpoint = server_->endpoint();
    o.access_key = "AKID";
    o.secret_key = "SECRET";
    auto env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
    auto s3 = S3UnderStorage::Create(*ParseUri("s3://bucket/p"), o, env);
    ASSERT_TRUE(s3.ok()) << s3.status().ToString();
    s3_ = std::shared_ptr<S3UnderStorage>(std::move(s3).value());
    RetryOptions retry;
    retry.max_retries = 3;
    retry.seed = 1;
    retrying_ = std::make_shared<RetryingUnderStorage>(s3_, retry, &clock_);
  }

  std::unique_ptr<ObjectWriter> Start(UnderStorage& store, WriteCondition condition = {}) {
    WriterOptions options;
    options.part_size = kPart;
    options.condition = std::move(condition);
    auto w = store.StartWrite("ckpt.pt", options);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? std::move(w).value() : nullptr;
  }

  std::vector<RecordedRequest> Requests(const std::string& method, const std::string& query) {
    std::vector<RecordedRequest> out;
    for (const RecordedRequest& r : server_->requests()) {
      if (r.method == method && r.query == query) out.push_back(r);
    }
    return out;
  }

  FakeS3 fake_;
  FakeClock clock_;
  std::unique_ptr<FakeHttpServer> server_;
  std::shared_ptr<S3UnderStorage> s3_;
  std::shared_ptr<RetryingUnderStorage> retrying_;
};

TEST_F(S3WriterHttpTest, ASmallObjectIsOnePutWithContentMd5AndItsCondition) {
  auto w = Start(*s3_, WriteCondition::Absent());
  const std::string body = "small checkpoint";
  auto info = w->Commit(body.size(), Span(body));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->version, s3::Hex(s3::Md5(Span(body))));
  auto puts = Requests("PUT", "");
  ASSERT_EQ(puts.size(), 1u);
  EXPECT_EQ(puts[0].Header("content-md5"), s3::Base64(s3::Md5(Span(body))));
  EXPECT_EQ(puts[0].Header("if-none-match"), "*");
  EXPECT_EQ(puts[0].body, body);
  EXPECT_EQ(Requests("HEAD", "").size(), 1u) << "the condition is also checked by HEAD";
  EXPECT_TRUE(Requests("POST", "uploads=").empty()) << "no multipart upload for one part";
}

TEST_F(S3WriterHttpTest, A412FromTheServerIsTheConditionsRefusal) {
  fake_.set_put_status(412);
  auto absent = Start(*s3_, WriteCondition::Absent());
  const std::string body = "x";
  EXPECT_EQ(absent->Commit(1, Span(body)).status().code(), StatusCode::kAlreadyExists);
  auto replace = Start(*s3_, WriteCondition::Version("abc"));
  // The HEAD sees no object: refused before the PUT.
  EXPECT_EQ(replace->Commit(1, Span(body)).status().code(), StatusCode::kFailedPrecondition);
}

// What a failed commit says about the key (ObjectWriter::Commit): a request that never left (the
// server cannot be reached) or that the server refused (4xx) left it as it was; after a lost
// answer or a server error the object may be there all the same: outcome_unknown(). A caller
// (write-back) renames or removes a file without the source only in the first case.
TEST_F(S3WriterHttpTest, ACommitThatNeverReachedTheServerLeftTheKeyAsItWas) {
  auto w = Start(*retrying_);
  server_.reset();  // Its port refuses connections from now on.
  const std::string body = "ckpt";
  const Status st = w->Commit(body.size(), Span(body)).status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_FALSE(st.outcome_unknown()) << st.ToString();
}

TEST_F(S3WriterHttpTest, ACommitWhoseAnswerWasLostOrAServerErrorMayHaveLanded) {
  const std::string body = "ckpt";
  for (int status : {0, 500, 503}) {
    fake_.set_put_status(status);
    auto w = Start(*s3_);
    const Status st = w->Commit(body.size(), Span(body)).status();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << status << ": " << st.ToString();
    EXPECT_TRUE(st.outcome_unknown()) << status << ": " << st.ToString();
  }
  for (int status : {403, 412}) {
    fake_.set_put_status(status);
    auto w = Start(*s3_, WriteCondition::Absent());
    const Status st = w->Commit(body.size(), Span(body)).status();
    EXPECT_FALSE(st.ok());
    EXPECT_FALSE(st.outcome_unknown()) << status << ": " << st.ToString();
  }
}

TEST_F(S3WriterHttpTest, ARetriedCommitThatMayHaveLandedOnceStaysMarked) {
  fake_.script_puts({0});     // The first PUT's answer is lost (nothing stored here)...
  fake_.set_put_status(403);  // ...then the server refuses: the first may still have landed.
  auto w = Start(*retrying_);
  const std::string body = "ckpt";
  const Status st = w->Commit(body.size(), Span(body)).status();
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_TRUE(st.outcome_unknown()) << st.ToString();
  EXPECT_EQ(Requests("PUT", "").size(), 2u);
}

TEST_F(S3WriterHttpTest, ALostPartIsNotACommitThatMayHaveLanded) {
  auto w = Start(*s3_);
  const std::string part(kPart, 'p');
  ASSERT_TRUE(w->WritePart(0, Span(part)).ok());
  fake_.set_part_status(0);  // The final part's answer is lost: the completion is never sent.
  const Status st = w->Commit(kPart + 3, Span(std::string("end"))).status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_FALSE(st.outcome_unknown()) << st.ToString();
  EXPECT_TRUE(Requests("POST", "uploadId=UP1").empty());
}

TEST_F(S3WriterHttpTest, MultipartUploadListsEveryPartInOrder) {
  auto w = Start(*s3_);
  const std::string part(kPart, 'p');
  const std::string tail = "tail";
  ASSERT_TRUE(w->WritePart(1, Span(part)).ok());
  ASSERT_TRUE(w->WritePart(0, Span(part)).ok());
  auto info = w->Commit(2 * kPart + tail.size(), Span(tail));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->version,
            s3::MultipartETag({s3::Md5(Span(part)), s3::Md5(Span(part)), s3::Md5(Span(tail))}));
  auto completes = Requests("POST", "uploadId=UP1");
  ASSERT_EQ(completes.size(), 1u);
  const std::string& doc = completes[0].body;
  size_t p1 = doc.find("<PartNumber>1</PartNumber>");
  size_t p2 = doc.find("<PartNumber>2</PartNumber>");
  size_t p3 = doc.find("<PartNumber>3</PartNumber>");
  EXPECT_TRUE(p1 != std::string::npos && p1 < p2 && p2 < p3 && p3 != std::string::npos) << doc;
  EXPECT_EQ(Requests("PUT", "partNumber=3&uploadId=UP1").at(0).body, tail);
  for (const RecordedRequest& r : Requests("PUT", "partNumber=1&uploadId=UP1")) {
    EXPECT_EQ(r.Header("content-md5"), s3::Base64(s3::Md5(Span(part))));
  }
}

TEST_F(S3WriterHttpTest, ACommitWhoseReplyWasLostIsRecognisedNotRepeated) {
  fake_.set_on_complete(FakeS3::OnComplete::kLoseReply);
  auto w = Start(*retrying_);
  const std::string part(kPart, 'q');
  ASSERT_TRUE(w->WritePart(0, Span(part)).ok());
  auto info = w->Commit(kPart + 3, Span(std::string("end")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(fake_.completions(), 1) << "the retry saw the object by its ETag and stopped";
  EXPECT_EQ(info->size, kPart + 3);
}

TEST_F(S3WriterHttpTest, AnErrorInsideA200CompletionIsRetried) {
  fake_.set_on_complete(FakeS3::OnComplete::kErrorIn200);
  auto w = Start(*retrying_);
  const std::string part(kPart, 'r');
  ASSERT_TRUE(w->WritePart(0, Span(part)).ok());
  auto info = w->Commit(kPart + 1, Span(std::string("!")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(Requests("POST", "uploadId=UP1").size(), 2u);
  EXPECT_EQ(fake_.completions(), 1);
}

TEST_F(S3WriterHttpTest, AbortAndAnAbandonedWriterSendAbortMultipartUpload) {
  const std::string part(kPart, 's');
  {
    auto w = Start(*s3_);
    ASSERT_TRUE(w->WritePart(0, Span(part)).ok());
    ASSERT_TRUE(w->Abort().ok());
    EXPECT_EQ(fake_.aborts(), 1);
  }
  EXPECT_EQ(fake_.aborts(), 1) << "an aborted writer does not abort again when dropped";
  {
    auto w = Start(*s3_);
    ASSERT_TRUE(w->WritePart(0, Span(part)).ok());
  }
  EXPECT_EQ(fake_.aborts(), 2);
  {
    auto w = Start(*s3_);  // Never started an upload: nothing to abort.
  }
  EXPECT_EQ(fake_.aborts(), 2);
}

TEST_F(S3WriterHttpTest, PartSizesBelowS3sMinimumAreRefused) {
  WriterOptions options;
  options.part_size = kPart - 1;
  EXPECT_EQ(s3_->StartWrite("k", options).status().code(), StatusCode::kInvalidArgument);
  options.part_size = kPart;
  options.condition = WriteCondition::Version("bad\r\nX-Injected: 1");
  EXPECT_EQ(s3_->StartWrite("k", options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::ufs
