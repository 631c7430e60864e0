#include "ufs/s3_url.h"

#include <gtest/gtest.h>

namespace cairn::ufs::s3 {
namespace {

TEST(S3UrlTest, UriEncodeFollowsSigV4Rules) {
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("a b+c/ü", true), "a%20b%2Bc/%C3%BC");
  EXPECT_EQ(UriEncode("a b+c/ü", false), "a%20b%2Bc%2F%C3%BC");
  EXPECT_EQ(UriEncode("!*'();:@&=$,?#[]%", false),
            "%21%2A%27%28%29%3B%3A%40%26%3D%24%2C%3F%23%5B%5D%25");
  EXPECT_EQ(UriEncode(std::string("\x01\xff", 2), false), "%01%FF");
}

TEST(S3UrlTest, UriDecodeRoundTripsAndRejectsBadEscapes) {
  std::string raw = "dir with space/ü+%~";
  EXPECT_EQ(*UriDecode(UriEncode(raw, true)), raw);
  EXPECT_EQ(*UriDecode("a+b"), "a+b");
  EXPECT_EQ(UriDecode("%4").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(UriDecode("%zz").status().code(), StatusCode::kInvalidArgument);
}

TEST(S3UrlTest, CanonicalQueryIsSortedAndEncoded) {
  EXPECT_EQ(CanonicalQuery({{"prefix", "a/b c"},
                            {"list-type", "2"},
                            {"continuation-token", "x+y=="},
                            {"delimiter", "/"}}),
            "continuation-token=x%2By%3D%3D&delimiter=%2F&list-type=2&prefix=a%2Fb%20c");
  EXPECT_EQ(CanonicalQuery({}), "");
  EXPECT_EQ(CanonicalQuery({{"acl", ""}}), "acl=");
}

TEST(S3UrlTest, ParseEndpoint) {
  auto ep = ParseEndpoint("http://127.0.0.1:9000");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->scheme, "http");
  EXPECT_EQ(ep->host, "127.0.0.1:9000");
  EXPECT_EQ(ep->base_path, "");
  ep = ParseEndpoint("HTTPS://gw.example.com/s3/");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->scheme, "https");
  EXPECT_EQ(ep->base_path, "/s3");
  EXPECT_EQ(ep->ToString(), "https://gw.example.com/s3");
  EXPECT_TRUE(ParseEndpoint("http://[::1]:9000").ok());
  for (std::string bad : {"minio:9000", "ftp://x", "http://", "http://h/?q=1"}) {
    EXPECT_EQ(ParseEndpoint(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(S3UrlTest, ObjectUrlPathAndVirtualHostedStyles) {
  Endpoint ep{"http", "127.0.0.1:9000", ""};
  EXPECT_EQ(ObjectUrl(ep, "bkt", true, "a b/c+d"), "http://127.0.0.1:9000/bkt/a%20b/c%2Bd");
  EXPECT_EQ(ObjectUrl(ep, "bkt", true, "", "list-type=2"), "http://127.0.0.1:9000/bkt?list-type=2");
  Endpoint aws{"https", "s3.us-east-1.amazonaws.com", ""};
  EXPECT_EQ(ObjectUrl(aws, "bkt", false, "k/ü"), "https://bkt.s3.us-east-1.amazonaws.com/k/%C3%BC");
  EXPECT_EQ(ObjectUrl(aws, "bkt", false, "", "list-type=2"),
            "https://bkt.s3.us-east-1.amazonaws.com/?list-type=2");
  Endpoint gw{"https", "gw", "/s3"};
  EXPECT_EQ(ObjectUrl(gw, "b", true, "./..//x"), "https://gw/s3/b/./..//x");
}

TEST(S3UrlTest, DnsCompatibleBuckets) {
  EXPECT_TRUE(IsDnsCompatibleBucket("my-bucket.v2"));
  EXPECT_FALSE(IsDnsCompatibleBucket("My_Bucket"));
  EXPECT_FALSE(IsDnsCompatibleBucket("ab"));
  EXPECT_FALSE(IsDnsCompatibleBucket("a..b"));
  EXPECT_FALSE(IsDnsCompatibleBucket("-ab"));
}

}  // namespace
}  // namespace cairn::ufs::s3
