#include "pagestore/page_format.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "pagestore/layout.h"
#include "pagestore/page_store.h"
#include "pagestore/test_util.h"

namespace cairn::pagestore {
namespace {

using testing::EncodeVersion1Header;

std::string Encode(std::string_view key, uint64_t index, const std::string& data) {
  auto sums = ChunkChecksums(data);
  auto header = EncodePageHeader(key, index, static_cast<uint32_t>(data.size()), sums);
  EXPECT_TRUE(header.ok()) << header.status().ToString();
  return *header;
}

TEST(PageKeyTest, SerializeIsCanonicalAndIdHashesIt) {
  PageKey key{"s3://b/a.tar", "etag1", 42};
  EXPECT_EQ(key.Serialize(), std::string("s3://b/a.tar\0etag1\0"
                                         "42",
                                         21));
  EXPECT_EQ(key.Id(), Hash128Of(key.Serialize()));
  PageKey other_version{"s3://b/a.tar", "etag2", 42};
  PageKey other_page{"s3://b/a.tar", "etag1", 43};
  EXPECT_NE(key.Id(), other_version.Id());
  EXPECT_NE(key.Id(), other_page.Id());
}

TEST(PageFormatTest, RoundTripsAndAlignsData) {
  for (size_t key_len : {0, 10, 4000, 9000}) {
    for (size_t data_len : {0, 1, 65536, 65537, 300000}) {
      std::string key(key_len, 'k');
      std::string data(data_len, 'd');
      std::string header = Encode(key, 7, data);
      EXPECT_EQ(header.size() % kPageAlignment, 0u);
      EXPECT_EQ(header.size(), RoundUp(HeaderLength(key_len, data_len), kPageAlignment));
      auto decoded = DecodePageHeader(header);
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
      EXPECT_EQ(decoded->serialized_key, key);
      EXPECT_EQ(decoded->page_index, 7u);
      EXPECT_EQ(decoded->data_length, data_len);
      EXPECT_EQ(decoded->data_offset, header.size());
      EXPECT_EQ(decoded->chunk_checksums, ChunkChecksums(data));
      EXPECT_EQ(decoded->file_size(), header.size() + data_len);
    }
  }
}

// The documented layout (docs/pagestore.md), byte for byte: changing it needs a new version.
TEST(PageFormatTest, FixedHeaderMatchesTheDocumentedLayout) {
  std::string data(70000, 'x');
  std::string header = Encode("key", 0x0102030405060708ULL, data);
  auto u32 = [&](size_t off) {
    return uint32_t(uint8_t(header[off])) | uint32_t(uint8_t(header[off + 1])) << 8 |
           uint32_t(uint8_t(header[off + 2])) << 16 | uint32_t(uint8_t(header[off + 3])) << 24;
  };
  EXPECT_EQ(header.substr(0, 8), "CAIRNPAG");
  EXPECT_EQ(header[8], 2);  // version 2, little-endian u16
  EXPECT_EQ(header[9], 0);
  EXPECT_EQ(header[10], 64);             // fixed header size
  EXPECT_EQ(u32(12), 64u + 3 + 18 * 8);  // header length: fixed + key + 18 checksums
  EXPECT_EQ(u32(16), 4096u);             // data offset
  EXPECT_EQ(u32(20), 70000u);            // data length
  EXPECT_EQ(u32(24), 4096u);             // chunk size
  EXPECT_EQ(u32(28), 18u);               // chunk count: ceil(70000 / 4096)
  EXPECT_EQ(u32(32), 3u);                // key length
  EXPECT_EQ(u32(36), 0u);                // flags
  EXPECT_EQ(uint8_t(header[40]), 0x08);  // page index, little-endian
  EXPECT_EQ(uint8_t(header[47]), 0x01);
  EXPECT_EQ(header.substr(64, 3), "key");
  EXPECT_EQ(header.find_first_not_of('\0', u32(12)), std::string::npos) << "padding is zeros";
}

TEST(PageFormatTest, EveryFlippedHeaderBitIsDetected) {
  std::string data(100, 'x');
  std::string header = Encode(PageKey{"s3://b/k", "v", 3}.Serialize(), 3, data);
  auto length = PeekHeaderLength(header);
  ASSERT_TRUE(length.ok());
  for (size_t byte = 0; byte < *length; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = header;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      auto decoded = DecodePageHeader(damaged);
      ASSERT_FALSE(decoded.ok()) << "flip of bit " << bit << " of byte " << byte;
      EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption);
    }
  }
}

TEST(PageFormatTest, RejectsTruncatedAndForeignHeaders) {
  std::string header = Encode("key", 0, std::string(10, 'x'));
  EXPECT_EQ(DecodePageHeader(std::string_view(header).substr(0, 63)).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodePageHeader(std::string_view(header).substr(0, 70)).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodePageHeader(std::string(4096, '\0')).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodePageHeader(std::string(4096, 'A')).status().code(), StatusCode::kCorruption);
  std::string future = header;
  future[8] = 3;  // A later format version is not ours to read.
  auto decoded = DecodePageHeader(future);
  EXPECT_EQ(decoded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(decoded.status().message().find("version"), std::string::npos);
}

// Format 1 (64 KiB chunks), as builds before format 2 wrote it: still decoded.
TEST(PageFormatTest, DecodesVersion1Headers) {
  std::string data(70000, 'x');
  std::string header = EncodeVersion1Header("key", 5, data);
  auto decoded = DecodePageHeader(header);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->format_version, kPageFormatVersion1);
  EXPECT_EQ(decoded->chunk_size, kVersion1ChunkSize);
  EXPECT_EQ(decoded->chunk_checksums, ChunkChecksums(data, kVersion1ChunkSize));
  EXPECT_EQ(decoded->data_offset, 4096u);
  // A version-1 header claiming 4 KiB chunks (or a version-2 one claiming 64 KiB) is damaged.
  std::string mixed = header;
  mixed[8] = 2;
  EXPECT_EQ(DecodePageHeader(mixed).status().code(), StatusCode::kCorruption);
}

TEST(PageFormatTest, EncodeRefusesOutOfBoundsInput) {
  std::string long_key(kMaxSerializedKeyLength + 1, 'k');
  EXPECT_EQ(EncodePageHeader(long_key, 0, 0, {}).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint64_t> one_sum = {1};
  EXPECT_EQ(EncodePageHeader("k", 0, 70000, one_sum).status().code(), StatusCode::kInvalidArgument);
}

TEST(DirLayoutTest, NamesComeOnlyFromTheIdHex) {
  DirLayout layout("/cache/");
  EXPECT_EQ(layout.root(), "/cache");
  Hash128 id{0xab00000000000001ULL, 0x2ULL};
  EXPECT_EQ(layout.PagePath(id),
            "/cache/v1/ab/ab00000000000001"
            "0000000000000002");
  EXPECT_EQ(layout.SubdirPath(0), "/cache/v1/00");
  EXPECT_EQ(layout.SubdirPath(255), "/cache/v1/ff");
  for (const char* object :
       {"../../etc/passwd", "a/b/../../c", "/abs", "ünï/cödé/日本", "x\\y", ""}) {
    PageKey key{object, "v", 0};
    std::string path = layout.PagePath(key.Id());
    EXPECT_EQ(path.size(), std::string("/cache/v1/ab/").size() + 32) << path;
    EXPECT_EQ(path.find(".."), std::string::npos);
    EXPECT_EQ(path.substr(0, 10), "/cache/v1/");
  }
}

TEST(DirLayoutTest, ParsesPageTempAndForeignNames) {
  Hash128 id{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  DirLayout layout("/c");
  std::string page = id.ToHex();
  auto parsed = DirLayout::ParseName(page);
  EXPECT_EQ(parsed.kind, DirLayout::NameKind::kPage);
  EXPECT_EQ(parsed.id, id);
  std::string temp = layout.TempPath(id, 0x1122334455667788ULL, 17);
  temp = temp.substr(temp.rfind('/') + 1);
  parsed = DirLayout::ParseName(temp);
  EXPECT_EQ(parsed.kind, DirLayout::NameKind::kTemp);
  EXPECT_EQ(parsed.id, id);
  EXPECT_EQ(parsed.nonce, 0x1122334455667788ULL);
  for (std::string other :
       {std::string("LOCK"), page.substr(1), page + "x", page + ".tmp-",
        page + ".tmp-1122334455667788-", page + ".tmp-1122334455667788-1a", std::string(32, 'A')}) {
    EXPECT_EQ(DirLayout::ParseName(other).kind, DirLayout::NameKind::kOther) << other;
  }
}

}  // namespace
}  // namespace cairn::pagestore
