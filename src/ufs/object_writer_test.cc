// ObjectWriter: the shared behaviour suite on the in-memory and folder stores, the part layout,
// and the S3 pieces that need no server (digests, multipart documents).
#include <gtest/gtest.h>

#include <memory>

#include "testing/test_util.h"
#include "ufs/local_ufs.h"
#include "ufs/memory_ufs.h"
#include "ufs/object_writer_behaviour.h"
#include "ufs/part_layout.h"
#include "ufs/s3_digest.h"
#include "ufs/s3_xml.h"

namespace cairn::ufs {
namespace {

using testing::ObjectWriterBehaviour;
using testing::WriterParam;

std::shared_ptr<UnderStorage> MakeLocal(const std::string&) {
  struct Holder {
    cairn::testing::TempDir dir{"writer"};
    std::unique_ptr<LocalUnderStorage> store;
  };
  auto holder = std::make_shared<Holder>();
  auto store = LocalUnderStorage::Open(holder->dir.str());
  if (!store.ok()) return nullptr;
  holder->store = std::move(store).value();
  UnderStorage* raw = holder->store.get();
  return std::shared_ptr<UnderStorage>(std::move(holder), raw);
}

INSTANTIATE_TEST_SUITE_P(
    Stores, ObjectWriterBehaviour,
    ::testing::Values(
        WriterParam{.name = "memory",
                    .make_store = [](const std::string&) -> std::shared_ptr<UnderStorage> {
                      return std::make_shared<MemoryUnderStorage>();
                    }},
        WriterParam{.name = "folder", .make_store = MakeLocal, .renames_directories = true}),
    [](const ::testing::TestParamInfo<WriterParam>& info) { return info.param.name; });

TEST(PartLayoutTest, DoublesEveryThousandPartsAndReachesTerabytes) {
  auto layout = PartLayout::Create(8 << 20);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->Size(0), 8u << 20);
  EXPECT_EQ(layout->Size(999), 8u << 20);
  EXPECT_EQ(layout->Size(1000), 16u << 20);
  EXPECT_EQ(layout->Size(9999), (8ull << 20) << 9);
  EXPECT_EQ(layout->Offset(1000), 1000ull * (8 << 20));
  EXPECT_EQ(layout->Offset(1001), 1000ull * (8 << 20) + (16 << 20));
  EXPECT_EQ(layout->MaxSize(), 1000ull * (8 << 20) * 1023);
  EXPECT_GT(layout->MaxSize(), 5ull << 40) << "S3's 5 TiB objects must fit";
  EXPECT_LE(layout->Size(9999), 5ull << 30) << "S3's largest part is 5 GiB";
}

TEST(PartLayoutTest, PartOfAndPartCountAgreeWithOffsets) {
  auto layout = PartLayout::Create(1000);
  ASSERT_TRUE(layout.ok());
  for (uint32_t i : {0u, 1u, 998u, 999u, 1000u, 1001u, 4321u, 9998u, 9999u}) {
    SCOPED_TRACE(i);
    const uint64_t first = layout->Offset(i);
    const uint64_t last = first + layout->Size(i) - 1;
    EXPECT_EQ(layout->Offset(i + 1), last + 1);
    EXPECT_EQ(*layout->PartOf(first), i);
    EXPECT_EQ(*layout->PartOf(last), i);
    EXPECT_EQ(*layout->PartCount(last + 1), i + 1);
    EXPECT_EQ(*layout->PartCount(first + 1), i + 1);
  }
  EXPECT_EQ(*layout->PartCount(0), 0u);
  EXPECT_EQ(layout->PartOf(layout->MaxSize()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(layout->PartCount(layout->MaxSize() + 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*layout->PartCount(layout->MaxSize()), PartLayout::kMaxParts);
}

TEST(PartLayoutTest, RefusesBasesOutsideItsRange) {
  EXPECT_EQ(PartLayout::Create(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartLayout::Create(PartLayout::kMaxBase + 1).status().code(),
            StatusCode::kInvalidArgument);
  auto largest = PartLayout::Create(PartLayout::kMaxBase);
  ASSERT_TRUE(largest.ok());
  EXPECT_GT(largest->MaxSize(), largest->Offset(PartLayout::kMaxParts - 1));  // No overflow.
}

TEST(PartLedgerTest, ChecksFullPartsAndTheCommit) {
  PartLedger ledger(*PartLayout::Create(10));
  EXPECT_TRUE(ledger.CheckFullPart(0, 10).ok());
  EXPECT_EQ(ledger.CheckFullPart(0, 9).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.CheckFullPart(PartLayout::kMaxParts, 10).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.CheckFullPart(1000, 20).code(), StatusCode::kOk) << "the second tier";
}

TEST(PartLedgerTest, CommitNeedsEveryPartBeforeTheTail) {
  PartLedger ledger(*PartLayout::Create(10));
  ledger.Record(0, 10);
  EXPECT_EQ(ledger.CheckCommit(25, 5).status().code(), StatusCode::kFailedPrecondition);
  ledger.Record(1, 10);
  EXPECT_EQ(*ledger.CheckCommit(25, 5), 3u);
  EXPECT_EQ(ledger.CheckCommit(25, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.CheckCommit(20, 10).status().code(), StatusCode::kOk)
      << "an exact multiple ends with a full tail (part 1, written before, is replaced)";
  EXPECT_EQ(ledger.CheckCommit(0, 1).status().code(), StatusCode::kInvalidArgument);
  ledger.Record(2, 10);
  EXPECT_EQ(ledger.CheckCommit(20, 10).status().code(), StatusCode::kFailedPrecondition)
      << "part 2 was written past the end of a 20-byte object";
  EXPECT_EQ(ledger.CheckCommit(0, 0).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*ledger.CheckCommit(30, 10), 3u);
}

TEST(S3DigestTest, KnownValues) {
  std::string hello = "hello";
  EXPECT_EQ(s3::Hex(s3::Md5(hello)), "5d41402abc4b2a76b9719d911017c592");
  EXPECT_EQ(s3::Base64(s3::Md5(hello)), "XUFAKrxLKna5cZ2REBfFkg==");
  std::string world = "world";
  EXPECT_EQ(s3::MultipartETag({s3::Md5(hello), s3::Md5(world)}),
            "065947336a2f2a95ba8899f3675c3be6-2");
  EXPECT_EQ(s3::Sha256Hex(std::span<const char>()), s3::kEmptySha256);
}

TEST(S3MultipartXmlTest, InitiateResult) {
  auto id = s3::ParseInitiateMultipartUpload(
      "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>2~abc.DEF_ghi</UploadId></InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "2~abc.DEF_ghi");
  EXPECT_FALSE(s3::ParseInitiateMultipartUpload("<InitiateMultipartUploadResult/>").ok());
  EXPECT_FALSE(
      s3::ParseInitiateMultipartUpload("<InitiateMultipartUploadResult><UploadId>a b</UploadId>"
                                       "</InitiateMultipartUploadResult>")
          .ok())
      << "an id with a space would break the signed URL";
  EXPECT_FALSE(s3::ParseInitiateMultipartUpload("<Other/>").ok());
  EXPECT_FALSE(s3::ParseInitiateMultipartUpload("not xml <").ok());
}

TEST(S3MultipartXmlTest, CompleteResultAndTheErrorInsideA200) {
  s3::S3ErrorBody error;
  auto etag = s3::ParseCompleteMultipartUpload(
      "<CompleteMultipartUploadResult><ETag>\"abc-2\"</ETag></CompleteMultipartUploadResult>",
      &error);
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  EXPECT_EQ(*etag, "abc-2");
  auto failed = s3::ParseCompleteMultipartUpload(
      "<Error><Code>InternalError</Code><Message>try again</Message></Error>", &error);
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(error.code, "InternalError");
  s3::S3ErrorBody none;
  EXPECT_FALSE(s3::ParseCompleteMultipartUpload("<CompleteMultipartUploadResult/>", &none).ok());
  EXPECT_TRUE(none.code.empty());
}

TEST(S3MultipartXmlTest, CompleteRequestEscapesWhatItLists) {
  std::string body = s3::BuildCompleteMultipartUpload({{1, "\"aa\""}, {2, "b<&>"}});
  EXPECT_NE(body.find("<Part><PartNumber>1</PartNumber><ETag>\"aa\"</ETag></Part>"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("<ETag>b&lt;&amp;&gt;</ETag>"), std::string::npos) << body;
}

}  // namespace
}  // namespace cairn::ufs
