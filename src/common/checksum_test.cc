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

namespace cairn {
namespace {

TEST(Hash64StreamTest, PiecesHashAsTheirConcatenation) {
  std::string data(5 * 1024 * 1024 + 77, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 9));
  for (size_t step : {1u, 63u, 4096u, 262144u, 5u * 1024 * 1024 + 77}) {
    Hash64Stream stream;
    for (size_t at = 0; at < data.size(); at += step) {
      stream.Update(std::string_view(data).substr(at, step));
    }
    EXPECT_EQ(stream.Digest(), Hash64(data)) << step;
  }
  Hash64Stream empty;
  EXPECT_EQ(empty.Digest(), Hash64(""));
}

}  // namespace
}  // namespace cairn
