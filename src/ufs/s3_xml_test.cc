#include "ufs/s3_xml.h"

#include <gtest/gtest.h>

#include <limits>

namespace cairn::ufs::s3 {
namespace {

TEST(S3XmlTest, ParsesListObjectsV2) {
  auto page = ParseListObjectsV2(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36"
      "Hy4vbOwM=</NextContinuationToken>"
      "<Contents><Key>p/naïve &amp; ü.txt</Key><LastModified>2009-10-12T17:50:30.000Z"
      "</LastModified><ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>"
      "<Size>434234</Size><StorageClass>STANDARD</StorageClass></Contents>"
      "<CommonPrefixes><Prefix>p/sub/</Prefix></CommonPrefixes>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "p/naïve & ü.txt");
  EXPECT_EQ(page->objects[0].size, 434234u);
  EXPECT_EQ(page->objects[0].version, "fba9dede5f27731c9771645a39863328");
  EXPECT_EQ(page->objects[0].mtime_ns, 1255369830LL * 1'000'000'000);
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"p/sub/"}));
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3XmlTest, RejectsMalformedListings) {
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><Contents>").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseListObjectsV2("<Other/>").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><Contents><Key>k</Key><Size>x</Size>"
                               "</Contents></ListBucketResult>")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated>"
                               "</ListBucketResult>")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  auto empty = ParseListObjectsV2("<ListBucketResult/>");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_FALSE(empty->truncated);
}

TEST(S3XmlTest, ParsesErrorDocuments) {
  S3ErrorBody e = ParseS3Error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The resource you requested "
      "does not exist</Message><Resource>/b/k</Resource><RequestId>4442587FB7D0A2F9</RequestId>"
      "</Error>");
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_EQ(e.message, "The resource you requested does not exist");
  EXPECT_EQ(e.resource, "/b/k");
  EXPECT_EQ(e.request_id, "4442587FB7D0A2F9");
  EXPECT_EQ(ParseS3Error("").code, "");
  EXPECT_EQ(ParseS3Error("not xml <").code, "");
}

TEST(S3XmlTest, Dates) {
  EXPECT_EQ(*ParseHttpDate("Wed, 12 Oct 2009 17:50:00 GMT"), 1255369800LL * 1'000'000'000);
  EXPECT_EQ(*ParseHttpDate("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_FALSE(ParseHttpDate("12 Oct 2009").ok());
  EXPECT_FALSE(ParseHttpDate("Wed, 12 Foo 2009 17:50:00 GMT").ok());
  EXPECT_EQ(*ParseIso8601("2009-10-12T17:50:30Z"), 1255369830LL * 1'000'000'000);
  EXPECT_EQ(*ParseIso8601("2009-10-12T17:50:30.123456789Z"),
            1255369830LL * 1'000'000'000 + 123456789);
  EXPECT_EQ(*ParseIso8601("2009-10-12T17:50:30.5Z"), 1255369830LL * 1'000'000'000 + 500000000);
  EXPECT_FALSE(ParseIso8601("2009-10-12 17:50:30Z").ok());
  EXPECT_FALSE(ParseIso8601("2009-13-12T17:50:30Z").ok());
}

// Found by fuzzing: these overflowed int64 nanoseconds (undefined behaviour) instead of failing.
TEST(S3XmlTest, DatesOutsideInt64NanosecondsAreErrors) {
  EXPECT_EQ(ParseIso8601("4018-01-01T00:00:00Z").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseIso8601("9999-12-31T23:59:59.999999999Z").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpDate("Fri, 31 Dec 9999 23:59:59 GMT").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpDate("Mon, 01 Jan 4018 00:00:00 GMT").status().code(),
            StatusCode::kInvalidArgument);
  // The last representable instant parses; one nanosecond (or one second) later does not.
  EXPECT_EQ(*ParseIso8601("2262-04-11T23:47:16.854775807Z"), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(ParseIso8601("2262-04-11T23:47:16.854775808Z").ok());
  EXPECT_FALSE(ParseIso8601("2262-04-11T23:47:17Z").ok());
  EXPECT_FALSE(ParseHttpDate("Sat, 12 Apr 2262 00:00:00 GMT").ok());
  // Before the epoch.
  EXPECT_FALSE(ParseIso8601("1969-12-31T23:59:59.999999999Z").ok());
  EXPECT_FALSE(ParseHttpDate("Wed, 31 Dec 1969 23:59:59 GMT").ok());
  EXPECT_FALSE(ParseIso8601("0000-01-01T00:00:00Z").ok());
  EXPECT_EQ(*ParseIso8601("1970-01-01T00:00:00.000000001Z"), 1);
}

TEST(S3XmlTest, DatesAreExactAcrossLeapYearsAndRejectDaysTheMonthLacks) {
  EXPECT_EQ(*ParseIso8601("2000-02-29T00:00:00Z"), 951782400LL * 1'000'000'000);
  EXPECT_EQ(*ParseIso8601("2024-03-01T12:00:00Z"), 1709294400LL * 1'000'000'000);
  EXPECT_EQ(*ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777LL * 1'000'000'000);
  EXPECT_EQ(*ParseIso8601("2199-12-31T23:59:59Z"), 7258118399LL * 1'000'000'000);
  EXPECT_FALSE(ParseIso8601("2023-02-29T00:00:00Z").ok());
  EXPECT_FALSE(ParseIso8601("1900-02-29T00:00:00Z").ok());
  EXPECT_FALSE(ParseIso8601("2023-04-31T00:00:00Z").ok());
  EXPECT_FALSE(ParseIso8601("2023-04-00T00:00:00Z").ok());
  EXPECT_FALSE(ParseIso8601("2023-04-01T24:00:00Z").ok());
  EXPECT_FALSE(ParseIso8601("2023-04-01T23:60:00Z").ok());
  // A leap second is the first second of the next minute, as timegm counts it.
  EXPECT_EQ(*ParseIso8601("2016-12-31T23:59:60Z"), *ParseIso8601("2017-01-01T00:00:00Z"));
}

TEST(S3XmlTest, ListingWithAFarFutureDateIsAnError) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult><Contents><Key>k</Key><LastModified>4018-10-12T17:50:30.000Z"
      "</LastModified><Size>1</Size></Contents></ListBucketResult>");
  EXPECT_EQ(page.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(page.status().message().find("'k'"), std::string::npos) << page.status().ToString();
}

TEST(S3XmlTest, StripETagQuotes) {
  EXPECT_EQ(StripETagQuotes("\"abc\""), "abc");
  EXPECT_EQ(StripETagQuotes("W/\"abc\""), "abc");
  EXPECT_EQ(StripETagQuotes("abc-3"), "abc-3");
  EXPECT_EQ(StripETagQuotes("\""), "\"");
}

}  // namespace
}  // namespace cairn::ufs::s3
