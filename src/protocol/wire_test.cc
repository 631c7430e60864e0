#include "protocol/wire.h"

#include <gtest/gtest.h>

#include <array>

#include "common/checksum.h"

namespace cairn::protocol {
namespace {

TEST(WireTest, FrameHeaderRoundTrips) {
  FrameHeader h{MessageType::kReadPage, 0, 0x1122334455667788ull, 1234};
  std::array<char, kFrameHeaderSize> buf;
  EncodeFrameHeader(h, buf.data());
  auto d = DecodeFrameHeader(buf);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, MessageType::kReadPage);
  EXPECT_EQ(d->request_id, h.request_id);
  EXPECT_EQ(d->payload_length, 1234u);
}

TEST(WireTest, CorruptHeadersAreRejected) {
  FrameHeader h{MessageType::kPing, 0, 7, 0};
  std::array<char, kFrameHeaderSize> buf;
  EncodeFrameHeader(h, buf.data());
  for (size_t i = 0; i < kFrameHeaderSize; ++i) {
    auto copy = buf;
    copy[i] ^= 0x40;
    EXPECT_FALSE(DecodeFrameHeader(copy).ok()) << "flip at byte " << i;
  }
  h.payload_length = kMaxPayload + 1;
  EncodeFrameHeader(h, buf.data());
  EXPECT_EQ(DecodeFrameHeader(buf).status().code(), StatusCode::kCorruption);
}

TEST(WireTest, ReadPageRequestRoundTripsAndValidates) {
  ReadPageRequest q;
  q.deadline_ms = 500;
  q.flags = kFlagRefetch;
  q.page_size = 1 << 20;
  q.offset = 4096;
  q.length = 4096;
  q.page_index = 3;
  q.object_size = 5u << 20;
  q.mount = "/bucket a";
  q.key = "dir/ünï code.bin";
  q.version = "\"etag\"";
  std::string bytes = EncodeReadPageRequest(q);
  auto d = DecodeReadPageRequest(bytes);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->key, q.key);
  EXPECT_EQ(d->mount, q.mount);
  EXPECT_EQ(d->page_index, 3u);
  EXPECT_EQ(d->flags, kFlagRefetch);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(DecodeReadPageRequest(std::string_view(bytes).substr(0, cut)).ok());
  }
  q.page_index = 5;  // Past the end of a 5 MiB object.
  EXPECT_FALSE(DecodeReadPageRequest(EncodeReadPageRequest(q)).ok());
  q.page_index = 0;
  q.page_size = 1000;  // Not a multiple of the checksum chunk.
  EXPECT_FALSE(DecodeReadPageRequest(EncodeReadPageRequest(q)).ok());
}

TEST(WireTest, PeerHintTravelsOnlyWithItsFlag) {
  ReadPageRequest q;
  q.flags = kFlagLoad | kFlagPeer;
  q.page_size = 1 << 20;
  q.length = 1;
  q.object_size = 10;
  q.mount = "/m";
  q.key = "k";
  q.version = "v";
  q.peer = "worker-2";
  std::string bytes = EncodeReadPageRequest(q);
  auto d = DecodeReadPageRequest(bytes);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->peer, "worker-2");
  EXPECT_EQ(d->flags, kFlagLoad | kFlagPeer);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(DecodeReadPageRequest(std::string_view(bytes).substr(0, cut)).ok());
  }
  q.peer = "";  // The flag promises a peer.
  EXPECT_EQ(DecodeReadPageRequest(EncodeReadPageRequest(q)).status().code(),
            StatusCode::kInvalidArgument);
  q.flags = kFlagLoad;  // No flag: no trailing string, whatever the field holds.
  q.peer = "ignored";
  std::string plain = EncodeReadPageRequest(q);
  EXPECT_EQ(bytes.size(), plain.size() + 2 + std::string("worker-2").size());
  d = DecodeReadPageRequest(plain);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->peer, "");
}

TEST(WireTest, ReplyHeaderRoundTrips) {
  ReadPageReplyHeader r;
  r.data_offset = 65536;
  r.data_length = 65536 * 2 + 10;
  r.checksums = {1, 2, 3};
  size_t consumed = 0;
  std::string bytes = EncodeReadPageReplyHeader(r);
  auto d = DecodeReadPageReplyHeader(bytes, &consumed);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(consumed, bytes.size());
  EXPECT_EQ(d->checksums, r.checksums);
  r.checksums.pop_back();
  EXPECT_FALSE(DecodeReadPageReplyHeader(EncodeReadPageReplyHeader(r), &consumed).ok());

  ReadPageReplyHeader e;
  e.status = StatusCode::kFailedPrecondition;
  e.error_message = "object changed";
  auto de = DecodeReadPageReplyHeader(EncodeReadPageReplyHeader(e), &consumed);
  ASSERT_TRUE(de.ok());
  EXPECT_EQ(de->status, StatusCode::kFailedPrecondition);
  EXPECT_EQ(de->error_message, "object changed");
}

TEST(WireTest, AlignedRangeCoversChunks) {
  ByteRange r = AlignedRange(70000, 10, 1 << 20);
  EXPECT_EQ(r.begin, 65536u);
  EXPECT_EQ(r.end, 131072u);
  r = AlignedRange(0, 100, 50);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 50u);
  EXPECT_EQ(PageLength(3u << 20, 2, 1 << 20), 1u << 20);
  EXPECT_EQ(PageLength((3u << 20) + 5, 3, 1 << 20), 5u);
  EXPECT_EQ(PageLength(3u << 20, 3, 1 << 20), 0u);
}

// Regression: page_index * page_size wrapped for huge indexes, so page 2^46 of 256 KiB pages
// (2^46 * 2^18 = 2^64) was page 0 and served page 0's bytes under another key.
TEST(WireTest, HugePageIndexesArePastTheEndInsteadOfWrapping) {
  constexpr uint32_t kPage = 256u << 10;
  EXPECT_EQ(PageLength(10u << 20, uint64_t{1} << 46, kPage), 0u);
  EXPECT_EQ(PageLength(UINT64_MAX, uint64_t{1} << 46, kPage), 0u);
  EXPECT_EQ(PageLength(UINT64_MAX, UINT64_MAX, kPage), 0u);
  EXPECT_EQ(PageLength(UINT64_MAX, UINT64_MAX / kPage, kPage), UINT64_MAX % kPage);
  EXPECT_EQ(PageLength(UINT64_MAX, UINT64_MAX / kPage - 1, kPage), kPage);
  EXPECT_EQ(PageLength(100, 0, 0), 0u);

  ReadPageRequest q;
  q.page_size = kPage;
  q.offset = 0;
  q.length = 4096;
  q.page_index = uint64_t{1} << 46;
  q.object_size = 10u << 20;
  q.mount = "/m";
  q.key = "k";
  q.version = "v";
  auto decoded = DecodeReadPageRequest(EncodeReadPageRequest(q));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::protocol
