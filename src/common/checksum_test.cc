#include "common/checksum.h"

#include <string>

#include <gtest/gtest.h>

namespace cairn {
namespace {

TEST(ChecksumTest, ChunksCoverDataAndDetectFlips) {
  std::string data(kChecksumChunkSize * 2 + 100, 'x');
  auto sums = ChunkChecksums(data);
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(ChunkCount(data.size()), 3u);
  EXPECT_EQ(sums[0], sums[1]);
  data[kChecksumChunkSize + 5] ^= 1;
  auto flipped = ChunkChecksums(data);
  EXPECT_EQ(flipped[0], sums[0]);
  EXPECT_NE(flipped[1], sums[1]);
  EXPECT_TRUE(ChunkChecksums({}).empty());
}

TEST(ChecksumTest, Hash128HexIsStable) {
  EXPECT_EQ(Hash128Of("abc").ToHex().size(), 32u);
  EXPECT_EQ(Hash128Of("abc"), Hash128Of("abc"));
  EXPECT_NE(Hash128Of("abc"), Hash128Of("abd"));
}

}  // namespace
}  // namespace cairn
