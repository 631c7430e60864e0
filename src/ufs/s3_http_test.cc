// S3UnderStorage against a scripted fake server: error mapping, misbehaving servers (ignored
// Range / If-Match), timeouts, and the retry wrapper on top.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ufs/fake_http_server.h"
#include "ufs/retrying_ufs.h"
#include "ufs/s3_digest.h"
#include "ufs/s3_ufs.h"

namespace cairn::ufs {
namespace {

using testing::FakeHttpServer;
using testing::RecordedRequest;

std::string ErrorXml(const std::string& code, const std::string& message) {
  return "<?xml version=\"1.0\"?><Error><Code>" + code + "</Code><Message>" + message +
         "</Message><RequestId>RID1</RequestId></Error>";
}

class S3HttpTest : public ::testing::Test {
 protected:
  void Serve(FakeHttpServer::Handler handler) {
    auto server = FakeHttpServer::Start(std::move(handler));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  std::shared_ptr<S3UnderStorage> Open(UfsOptions o = {}) {
    o.endpoint = server_->endpoint();
    o.access_key = "AKID";
    o.secret_key = "SECRET";
    auto env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
    auto s3 = S3UnderStorage::Create(*ParseUri("s3://bucket/p"), o, env);
    EXPECT_TRUE(s3.ok()) << s3.status().ToString();
    return std::shared_ptr<S3UnderStorage>(std::move(s3).value());
  }

  StatusOr<std::string> Read(UnderStorage& ufs, std::string_view version, uint64_t offset,
                             size_t len) {
    std::string buf(len, '\0');
    auto n = ufs.Read("obj", version, offset, std::span<char>(buf.data(), buf.size()));
    if (!n.ok()) return n.status();
    buf.resize(*n);
    return buf;
  }

  std::unique_ptr<FakeHttpServer> server_;
};

TEST_F(S3HttpTest, ForbiddenMapsToPermissionDeniedNamingTheCredentialSource) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(403, {}, ErrorXml("AccessDenied", "Access Denied"));
  });
  auto s3 = Open();
  auto list = s3->List(ListOptions());
  ASSERT_EQ(list.status().code(), StatusCode::kPermissionDenied) << list.status().ToString();
  EXPECT_NE(list.status().message().find("check credentials"), std::string::npos);
  EXPECT_NE(list.status().message().find("options"), std::string::npos);
  EXPECT_NE(list.status().message().find("AccessDenied"), std::string::npos);
  Status probe = Probe(*s3);
  EXPECT_EQ(probe.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(probe.message().find("wrong credentials"), std::string::npos) << probe.ToString();
}

TEST_F(S3HttpTest, NotFoundCodesAndBadRequest) {
  Serve([](const RecordedRequest& r) {
    if (r.method == "HEAD") return FakeHttpServer::Response(404, {}, "", true);
    if (!r.query.empty()) {
      return FakeHttpServer::Response(404, {}, ErrorXml("NoSuchBucket", "no bucket"));
    }
    return FakeHttpServer::Response(400, {}, ErrorXml("InvalidArgument", "bad thing"));
  });
  auto s3 = Open();
  EXPECT_EQ(s3->Stat("obj").status().code(), StatusCode::kNotFound);
  auto list = s3->List(ListOptions());
  EXPECT_EQ(list.status().code(), StatusCode::kNotFound);
  EXPECT_NE(list.status().message().find("bucket 'bucket' does not exist"), std::string::npos)
      << list.status().ToString();
  auto read = Read(*s3, "", 0, 10);
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find("bad thing"), std::string::npos);
  // Delete of a missing key: NotFound from the HEAD, and no DELETE is sent.
  EXPECT_EQ(s3->Delete("obj").code(), StatusCode::kNotFound);
  for (const auto& r : server_->requests()) EXPECT_NE(r.method, "DELETE");
}

TEST_F(S3HttpTest, KeysWithDotSegmentsAreRefusedBeforeAnyRequest) {
  Serve([](const RecordedRequest& r) { return FakeHttpServer::Response(200, {}, "x"); });
  auto s3 = Open();
  for (std::string key : {"../secret", "a/../../b", "a/./b", ".", "x/.."}) {
    std::string buf(4, '\0');
    auto read = s3->Read(key, "", 0, std::span<char>(buf.data(), buf.size()));
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(s3->Stat(key).status().code(), StatusCode::kInvalidArgument) << key;
  }
  EXPECT_TRUE(server_->requests().empty()) << "a dot-segment key reached the server";
  // Dots inside a name are ordinary characters.
  EXPECT_TRUE(s3->Stat("a..b/.hidden/c.").ok());
}

TEST_F(S3HttpTest, SlowDownIsUnavailableAndRetried) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(503, {}, ErrorXml("SlowDown", "Reduce your request rate"));
  });
  auto s3 = Open();
  auto direct = s3->Stat("obj");
  EXPECT_EQ(direct.status().code(), StatusCode::kUnavailable);
  FakeClock clock;
  RetryOptions retry;
  retry.max_retries = 2;
  retry.seed = 7;
  RetryingUnderStorage retrying(s3, retry, &clock);
  auto list = retrying.List(ListOptions());
  EXPECT_EQ(list.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(list.status().message().find("SlowDown"), std::string::npos);
  EXPECT_NE(list.status().message().find("giving up after 3 attempt(s)"), std::string::npos)
      << list.status().ToString();
  EXPECT_EQ(server_->requests().size(), 1u + 3u);
}

TEST_F(S3HttpTest, ETagMismatchIsFailedPreconditionEvenIfServerIgnoresIfMatch) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(206, {{"ETag", "\"new\""}}, "abcde");
  });
  auto s3 = Open();
  auto stale = Read(*s3, "old", 0, 5);
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition) << stale.status().ToString();
  auto fresh = Read(*s3, "new", 0, 5);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(*fresh, "abcde");
}

TEST_F(S3HttpTest, PreconditionFailedStatus) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(412, {}, ErrorXml("PreconditionFailed", "nope"));
  });
  auto s3 = Open();
  EXPECT_EQ(Read(*s3, "old", 0, 5).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(S3HttpTest, ServerIgnoringRangeStillYieldsTheRequestedSlice) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(200, {{"ETag", "\"v\""}}, "0123456789abcdefghij");
  });
  auto s3 = Open();
  auto mid = Read(*s3, "v", 5, 4);
  ASSERT_TRUE(mid.ok()) << mid.status().ToString();
  EXPECT_EQ(*mid, "5678");
  auto tail = Read(*s3, "", 18, 10);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, "ij");
}

TEST_F(S3HttpTest, RangePastEndReadsZeroButStillChecksTheVersion) {
  Serve([](const RecordedRequest& r) {
    if (r.method == "HEAD") {
      return FakeHttpServer::Response(200, {{"ETag", "\"cur\""}}, "12345", true);
    }
    return FakeHttpServer::Response(416, {}, ErrorXml("InvalidRange", "bad range"));
  });
  auto s3 = Open();
  auto ok = Read(*s3, "cur", 100, 10);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "");
  EXPECT_EQ(Read(*s3, "old", 100, 10).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(S3HttpTest, ParallelPartsWithDifferentETagsAreRejected) {
  // Every other part comes from a "newer" object: the read must not stitch them together.
  Serve([](const RecordedRequest& r) {
    bool odd = r.Header("range").find("bytes=4-") != std::string::npos;
    return FakeHttpServer::Response(206, {{"ETag", odd ? "\"b\"" : "\"a\""}}, "xxxx");
  });
  UfsOptions o;
  o.parallel_read_threshold = 8;
  o.parallel_read_part = 4;
  auto s3 = Open(o);
  auto r = Read(*s3, "", 0, 12);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_EQ(server_->requests().size(), 3u);
}

TEST_F(S3HttpTest, VersionsThatCouldInjectHeadersAreRejectedBeforeSending) {
  Serve([](const RecordedRequest& r) { return FakeHttpServer::Response(206, {}, "x"); });
  auto s3 = Open();
  for (std::string bad : {"v\r\nx-amz-evil: 1", "a\"b", "with space"}) {
    EXPECT_EQ(Read(*s3, bad, 0, 1).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(S3HttpTest, SlowServerIsDeadlineExceeded) {
  Serve([](const RecordedRequest& r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return FakeHttpServer::Response(200, {{"ETag", "\"v\""}}, "", r.method == "HEAD");
  });
  UfsOptions o;
  o.request_timeout_ms = 200;
  auto s3 = Open(o);
  auto start = std::chrono::steady_clock::now();
  auto info = s3->Stat("obj");
  EXPECT_EQ(info.status().code(), StatusCode::kDeadlineExceeded) << info.status().ToString();
  EXPECT_NE(info.status().message().find(server_->endpoint()), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1200));
}

TEST_F(S3HttpTest, GarbledListingIsUnavailable) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(200, {}, "<ListBucketResult><Contents><Key>a");
  });
  auto s3 = Open();
  EXPECT_EQ(s3->List(ListOptions()).status().code(), StatusCode::kUnavailable);
}

TEST_F(S3HttpTest, ListStripsTheRootPrefixAndHidesFolderMarkers) {
  Serve([](const RecordedRequest& r) {
    return FakeHttpServer::Response(
        200, {},
        "<ListBucketResult><IsTruncated>true</IsTruncated>"
        "<NextContinuationToken>T2</NextContinuationToken>"
        "<Contents><Key>p/</Key><Size>0</Size></Contents>"
        "<Contents><Key>p/a.txt</Key><Size>3</Size><ETag>&quot;e&quot;</ETag>"
        "<LastModified>2024-01-02T03:04:05.500Z</LastModified></Contents>"
        "<CommonPrefixes><Prefix>p/d/</Prefix></CommonPrefixes></ListBucketResult>");
  });
  auto s3 = Open();
  auto page = s3->List(ListOptions());
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "a.txt");
  EXPECT_EQ(page->objects[0].version, "e");
  EXPECT_EQ(page->objects[0].size, 3u);
  EXPECT_EQ(page->objects[0].mtime_ns, 1704164645'500000000LL);
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"d/"}));
  EXPECT_EQ(page->next_token, "T2");
  EXPECT_NE(server_->requests()[0].query.find("prefix=p%2F"), std::string::npos);
}

// radosgw 16 completes an upload of copied parts with an empty <ETag>: the rename takes the
// object a HEAD of `to` shows only where its ETag is the one the copied parts give.
class S3MultipartCopyTest : public S3HttpTest {
 protected:
  static constexpr uint64_t kSize = 6 << 20;
  static constexpr const char* kPart1 = "00112233445566778899aabbccddeeff";
  static constexpr const char* kPart2 = "ffeeddccbbaa99887766554433221100";

  // The multipart ETag of parts kPart1 and kPart2, as S3 computes it.
  static std::string ExpectedETag() {
    std::string md5s;
    for (const char* hex : {kPart1, kPart2}) {
      for (int i = 0; i < 16; ++i)
        md5s.push_back(static_cast<char>(std::stoi(std::string(hex + 2 * i, 2), nullptr, 16)));
    }
    return s3::Hex(s3::Md5(md5s)) + "-2";
  }

  // A server whose completion answer has an empty ETag and whose HEAD of the destination
  // shows `destination_etag`.
  void ServeCopy(std::string destination_etag) {
    Serve([destination_etag](const RecordedRequest& r) {
      if (r.method == "HEAD" && r.path == "/bucket/p/big.tmp") {
        return FakeHttpServer::Response(200, {{"ETag", "\"src\""}}, std::string(kSize, 'x'), true);
      }
      if (r.method == "HEAD") {
        return FakeHttpServer::Response(200, {{"ETag", "\"" + destination_etag + "\""}},
                                        std::string(kSize, 'x'), true);
      }
      if (r.method == "GET") {
        return FakeHttpServer::Response(
            200, {}, "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
      }
      if (r.method == "POST" && r.query == "uploads=") {
        return FakeHttpServer::Response(200, {},
                                        "<InitiateMultipartUploadResult><UploadId>U1</UploadId>"
                                        "</InitiateMultipartUploadResult>");
      }
      if (r.method == "PUT") {
        const char* etag = r.query.starts_with("partNumber=1&") ? kPart1 : kPart2;
        return FakeHttpServer::Response(
            200, {}, std::string("<CopyPartResult><ETag>\"") + etag + "\"</ETag></CopyPartResult>");
      }
      if (r.method == "POST") {
        return FakeHttpServer::Response(200, {},
                                        "<CompleteMultipartUploadResult><ETag></ETag>"
                                        "</CompleteMultipartUploadResult>");
      }
      return FakeHttpServer::Response(204, {}, "");
    });
  }

  StatusOr<ObjectInfo> RenameBig() {
    UfsOptions o;
    o.multipart_copy_threshold = 5 << 20;
    o.copy_part_size = 5 << 20;
    return Open(o)->Rename("big.tmp", "big", RenameOptions{});
  }

  int Requests(const std::string& method, const std::string& query_prefix) {
    int n = 0;
    for (const RecordedRequest& r : server_->requests()) {
      if (r.method == method && r.query.starts_with(query_prefix)) ++n;
    }
    return n;
  }
};

TEST_F(S3MultipartCopyTest, ACompletionWithoutAnETagIsCheckedAgainstTheCopiedParts) {
  ServeCopy(ExpectedETag());
  StatusOr<ObjectInfo> moved = RenameBig();
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->version, ExpectedETag());
  EXPECT_EQ(moved->size, kSize);
  EXPECT_EQ(Requests("PUT", "partNumber="), 2);
  EXPECT_EQ(Requests("DELETE", "uploadId="), 0) << "a completed upload is not aborted";
  EXPECT_EQ(Requests("DELETE", ""), 1) << "the old name is deleted";
}

TEST_F(S3MultipartCopyTest, AnotherObjectUnderTheNewNameFailsTheRenameAndAbortsTheUpload) {
  ServeCopy("0123456789abcdef0123456789abcdef-2");
  StatusOr<ObjectInfo> moved = RenameBig();
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), StatusCode::kUnavailable) << moved.status().ToString();
  EXPECT_EQ(Requests("DELETE", "uploadId="), 1);
  EXPECT_EQ(Requests("DELETE", ""), 1) << "the old name stays";
}

}  // namespace
}  // namespace cairn::ufs
