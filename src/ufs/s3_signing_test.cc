// Checks what the S3 client puts on the wire: requests captured by a fake server are re-signed
// with an independent SigV4 implementation (itself checked against AWS's published example), so
// a key/query encoding that S3 would canonicalize differently, a missing or unsigned
// x-amz-content-sha256 or x-amz-security-token, or a wrong payload hash fails here, although
// s3rver (which does not verify signatures) would accept it.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ufs/fake_http_server.h"
#include "ufs/s3_sigv4.h"
#include "ufs/s3_ufs.h"

namespace cairn::ufs {
namespace {

using testing::FakeHttpServer;
using testing::RecordedRequest;

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 0xf];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

// Independent of s3_url.cc on purpose.
std::string AwsEncode(std::string_view s, bool keep_slash) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
    if (plain) {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string AwsQuery(std::map<std::string, std::string> params) {
  std::vector<std::pair<std::string, std::string>> enc;
  for (const auto& [k, v] : params) enc.emplace_back(AwsEncode(k, false), AwsEncode(v, false));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) out += (out.empty() ? "" : "&") + k + "=" + v;
  return out;
}

struct SigInput {
  std::string method, uri, query, payload_hash, amz_date, region = "us-east-1", secret;
  std::vector<std::pair<std::string, std::string>> headers;  // Sorted, lowercase, trimmed.
};

std::string Sign(const SigInput& in) {
  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : in.headers) {
    canonical_headers += name + ":" + value + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + name;
  }
  std::string canonical = in.method + "\n" + in.uri + "\n" + in.query + "\n" + canonical_headers +
                          "\n" + signed_headers + "\n" + in.payload_hash;
  std::string date = in.amz_date.substr(0, 8);
  std::string scope = date + "/" + in.region + "/s3/aws4_request";
  std::string to_sign =
      "AWS4-HMAC-SHA256\n" + in.amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
  std::string k = Hmac("AWS4" + in.secret, date);
  k = Hmac(k, in.region);
  k = Hmac(k, "s3");
  k = Hmac(k, "aws4_request");
  std::string sig = Hmac(k, to_sign);
  return Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

TEST(SigV4ReferenceTest, MatchesAwsPublishedGetObjectExample) {
  // From the AWS S3 SigV4 documentation ("Example: GET Object").
  SigInput in;
  in.method = "GET";
  in.uri = "/test.txt";
  in.payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  in.amz_date = "20130524T000000Z";
  in.secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  in.headers = {{"host", "examplebucket.s3.amazonaws.com"},
                {"range", "bytes=0-9"},
                {"x-amz-content-sha256", in.payload_hash},
                {"x-amz-date", in.amz_date}};
  EXPECT_EQ(Sign(in), "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// Re-signs `req` as S3 would, with the canonical URI/query derived from the semantic values.
void ExpectValidSignature(const RecordedRequest& req, const std::string& expected_uri,
                          const std::map<std::string, std::string>& expected_params,
                          const std::string& secret) {
  SCOPED_TRACE(req.method + " " + req.path + "?" + req.query);
  // What went on the wire must already be canonical, or S3 would compute something else.
  EXPECT_EQ(req.path, expected_uri);
  EXPECT_EQ(req.query, AwsQuery(expected_params));
  std::string auth = req.Header("authorization");
  ASSERT_TRUE(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/")) << auth;
  size_t sh = auth.find("SignedHeaders=");
  size_t sig = auth.find("Signature=");
  ASSERT_NE(sh, std::string::npos);
  ASSERT_NE(sig, std::string::npos);
  std::string signed_list = auth.substr(sh + 14, auth.find(',', sh) - sh - 14);
  SigInput in;
  in.method = req.method;
  in.uri = expected_uri;
  in.query = AwsQuery(expected_params);
  in.payload_hash = req.Header("x-amz-content-sha256");
  in.amz_date = req.Header("x-amz-date");
  in.secret = secret;
  size_t pos = 0;
  std::vector<std::string> names;
  while (pos <= signed_list.size()) {
    size_t semi = signed_list.find(';', pos);
    if (semi == std::string::npos) semi = signed_list.size();
    names.push_back(signed_list.substr(pos, semi - pos));
    pos = semi + 1;
  }
  for (std::string required : {"host", "x-amz-content-sha256", "x-amz-date"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
  // S3 sorts the signed headers by name ("x-amz-copy-source" before "x-amz-copy-source-range").
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << signed_list;
  for (const std::string& name : names) in.headers.emplace_back(name, req.Header(name));
  EXPECT_EQ(auth.substr(sig + 10), Sign(in));
  EXPECT_EQ(in.payload_hash, Sha256Hex(req.body)) << "payload hash must match the body";
}

class S3SigningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = FakeHttpServer::Start([](const RecordedRequest& r) {
      if (r.method == "HEAD") {
        return FakeHttpServer::Response(200, {{"ETag", "\"e1\""}}, "12345", true);
      }
      if (r.method == "GET" && !r.query.empty()) {
        return FakeHttpServer::Response(200, {},
                                        "<ListBucketResult><IsTruncated>false</IsTruncated>"
                                        "</ListBucketResult>");
      }
      if (r.method == "GET") {
        return FakeHttpServer::Response(206, {{"ETag", "\"e1\""}}, "12345");
      }
      return FakeHttpServer::Response(200, {{"ETag", "\"e2\""}}, "");
    });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  std::unique_ptr<S3UnderStorage> Open(const std::string& uri, const std::string& token = "") {
    UfsOptions o;
    o.endpoint = server_->endpoint();
    o.access_key = "AKID";
    o.secret_key = "SECRET/+key";
    o.session_token = token;
    auto env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
    auto parsed = ParseUri(uri);
    EXPECT_TRUE(parsed.ok());
    auto s3 = S3UnderStorage::Create(*parsed, o, env);
    EXPECT_TRUE(s3.ok()) << s3.status().ToString();
    return std::move(s3).value();
  }

  std::unique_ptr<FakeHttpServer> server_;
};

TEST_F(S3SigningTest, HeadOfUnicodeKeyUnderPrefixIsCanonicalAndSigned) {
  auto s3 = Open("s3://bucket/pre fix");
  const std::string key = "dir with space/ü+x=(1)&~.txt";
  auto info = s3->Stat(key);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 5u);
  EXPECT_EQ(info->version, "e1");
  auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "HEAD");
  ExpectValidSignature(reqs[0], "/bucket/" + AwsEncode("pre fix/" + key, true), {}, "SECRET/+key");
}

TEST_F(S3SigningTest, ListQueryIsSortedEncodedAndSigned) {
  auto s3 = Open("s3://bucket/root");
  ListOptions o;
  o.prefix = "a b/ü+";
  o.continuation_token = "tok+/=";
  o.max_keys = 5;
  auto page = s3->List(o);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  ExpectValidSignature(reqs[0], "/bucket",
                       {{"list-type", "2"},
                        {"max-keys", "5"},
                        {"prefix", "root/a b/ü+"},
                        {"delimiter", "/"},
                        {"continuation-token", "tok+/="}},
                       "SECRET/+key");
}

TEST_F(S3SigningTest, PutSignsThePayloadHash) {
  auto s3 = Open("s3://bucket");
  std::string body = "hello, payload";
  ASSERT_TRUE(s3->Write("k/v.bin", std::span<const char>(body.data(), body.size())).ok());
  auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "PUT");
  EXPECT_EQ(reqs[0].body, body);
  ExpectValidSignature(reqs[0], "/bucket/k/v.bin", {}, "SECRET/+key");
}

TEST_F(S3SigningTest, RangeIfMatchAndSessionTokenAreSigned) {
  auto s3 = Open("s3://bucket", "SESSION+TOKEN/==");
  std::string buf(5, '\0');
  auto n = s3->Read("obj", "e1", 10, std::span<char>(buf.data(), buf.size()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].Header("range"), "bytes=10-14");
  EXPECT_EQ(reqs[0].Header("if-match"), "\"e1\"");
  EXPECT_EQ(reqs[0].Header("x-amz-security-token"), "SESSION+TOKEN/==");
  std::string auth = reqs[0].Header("authorization");
  EXPECT_NE(auth.find("range"), std::string::npos) << auth;
  EXPECT_NE(auth.find("if-match"), std::string::npos) << auth;
  EXPECT_NE(auth.find("x-amz-security-token"), std::string::npos) << auth;
  ExpectValidSignature(reqs[0], "/bucket/obj", {}, "SECRET/+key");
}

TEST(CurlHeaderOrderTest, NamesThatPrefixOthersAreWhatCurlMisorders) {
  EXPECT_TRUE(
      s3::CurlMisordersHeaders({"x-amz-copy-source: /b/k", "X-Amz-Copy-Source-If-Match: \"e\""}));
  EXPECT_TRUE(
      s3::CurlMisordersHeaders({"x-amz-copy-source-range: bytes=0-1", "x-amz-copy-source: /b/k"}));
  EXPECT_FALSE(s3::CurlMisordersHeaders(
      {"range: bytes=0-1", "if-match: \"e\"", "x-amz-content-sha256: UNSIGNED-PAYLOAD"}));
  // Whole lines sort as names do when the longer name goes on with a byte above ':' ...
  EXPECT_FALSE(s3::CurlMisordersHeaders({"x-amz-a: 1", "x-amz-ab: 2"}));
  // ... and wrongly with one below it, a digit as much as '-'.
  EXPECT_TRUE(s3::CurlMisordersHeaders({"x-amz-a: 1", "x-amz-a2: 2"}));
  EXPECT_FALSE(s3::CurlMisordersHeaders({}));
}

TEST(SignV4Test, RefusesWhatItCannotSign) {
  s3::SigV4Input in;
  in.method = "GET";
  in.url = "no-scheme/bucket/key";
  in.headers = {"x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  EXPECT_EQ(s3::SignV4(in).status().code(), StatusCode::kInvalidArgument);
  in.url = "http://host:9000/bucket/key";
  in.headers.clear();
  EXPECT_EQ(s3::SignV4(in).status().code(), StatusCode::kInvalidArgument);
}

TEST(S3SigningCopyTest, ACopyIsSignedWithItsCopySourceHeadersInNameOrder) {
  auto server = FakeHttpServer::Start([](const RecordedRequest& r) {
    if (r.method == "HEAD") {
      return FakeHttpServer::Response(200, {{"ETag", "\"e1\""}}, "12345", true);
    }
    if (r.method == "GET") {
      return FakeHttpServer::Response(200, {},
                                      "<ListBucketResult><IsTruncated>false</IsTruncated>"
                                      "</ListBucketResult>");
    }
    if (r.method == "PUT") {
      return FakeHttpServer::Response(
          200, {},
          "<CopyObjectResult><ETag>\"e1\"</ETag>"
          "<LastModified>2026-12-04T00:00:00.000Z</LastModified></CopyObjectResult>");
    }
    return FakeHttpServer::Response(204, {}, "");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  UfsOptions o;
  o.endpoint = (*server)->endpoint();
  o.access_key = "AKID";
  o.secret_key = "SECRET/+key";
  auto env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto s3 = S3UnderStorage::Create(*ParseUri("s3://bucket/pre"), o, env);
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  auto moved = (*s3)->Rename("a b.tmp", "a b", RenameOptions{});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->version, "e1");
  EXPECT_EQ(moved->size, 5u);
  bool copied = false;
  for (const RecordedRequest& req : (*server)->requests()) {
    if (req.method != "PUT") continue;
    copied = true;
    EXPECT_EQ(req.Header("x-amz-copy-source"), "/bucket/pre/a%20b.tmp");
    EXPECT_EQ(req.Header("x-amz-copy-source-if-match"), "\"e1\"");
    std::string auth = req.Header("authorization");
    EXPECT_NE(auth.find("x-amz-copy-source;x-amz-copy-source-if-match"), std::string::npos) << auth;
    ExpectValidSignature(req, "/bucket/pre/a%20b", {}, "SECRET/+key");
  }
  EXPECT_TRUE(copied);
}

TEST_F(S3SigningTest, AnonymousRequestsAreNotSigned) {
  UfsOptions o;
  o.endpoint = server_->endpoint();
  auto env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto s3 = S3UnderStorage::Create(*ParseUri("s3://public"), o, env);
  ASSERT_TRUE(s3.ok());
  ASSERT_TRUE((*s3)->Stat("k").ok());
  auto reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].Header("authorization"), "");
  EXPECT_EQ((*s3)->credentials_source(), "none (anonymous requests)");
}

}  // namespace
}  // namespace cairn::ufs
