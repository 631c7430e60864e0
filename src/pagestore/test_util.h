// Helpers shared by the page store tests (test-only; not part of cairn_pagestore).
#ifndef CAIRN_PAGESTORE_TEST_UTIL_H_
#define CAIRN_PAGESTORE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "pagestore/page_format.h"
#include "pagestore/page_store.h"
#include "testing/test_util.h"

namespace cairn::pagestore::testing {

// The shared test library's (src/testing): a fresh folder removed at destruction; bytes.
using ::cairn::testing::TempDir;

// Deterministic pseudo-random bytes.
inline std::string Bytes(uint64_t seed, size_t n) { return ::cairn::testing::RandomBytes(n, seed); }

inline PageKey Key(uint64_t i, std::string version = "v1") {
  return PageKey{"s3://bucket/data/object-" + std::to_string(i / 4), std::move(version), i % 4};
}

// Reads the whole page through the reader.
inline std::string ReadAll(const PageReader& reader) {
  std::string out(reader.data_length(), '\0');
  Status s = reader.ReadAt(0, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// The header and padding of a page file of format version 1 (64 KiB chunks), written field by
// field from docs/pagestore.md as builds before format 2 wrote them: data_offset bytes.
inline std::string EncodeVersion1Header(std::string_view key, uint64_t page_index,
                                        std::string_view data) {
  std::vector<uint64_t> sums = ChunkChecksums(data, kVersion1ChunkSize);
  const uint64_t header_length = kFixedHeaderSize + key.size() + 8 * sums.size();
  std::string out(RoundUp(header_length, kPageAlignment), '\0');
  auto put = [&](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>(v >> (8 * i));
  };
  out.replace(0, 8, "CAIRNPAG");
  put(8, kPageFormatVersion1, 2);
  put(10, kFixedHeaderSize, 2);
  put(12, header_length, 4);
  put(16, out.size(), 4);
  put(20, data.size(), 4);
  put(24, kVersion1ChunkSize, 4);
  put(28, sums.size(), 4);
  put(32, key.size(), 4);
  put(40, page_index, 8);
  out.replace(kFixedHeaderSize, key.size(), key);
  for (size_t i = 0; i < sums.size(); ++i) put(kFixedHeaderSize + key.size() + 8 * i, sums[i], 8);
  // The header checksum covers [0, header_length) with its own field as zero (it is zero here).
  put(48, Checksum64(std::span<const char>(out.data(), header_length)), 8);
  return out;
}

// Waits (up to 30 s) until the store's startup scan has finished.
inline bool WaitForRecovery(const PageStore& store) {
  for (int i = 0; i < 3000; ++i) {
    if (!store.Stats().recovering) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// What `du` counts: allocated blocks of every file and folder under `root`, root included.
inline uint64_t DiskUsage(const std::string& root) {
  uint64_t total = 0;
  struct stat st;
  if (::lstat(root.c_str(), &st) == 0) total += uint64_t(st.st_blocks) * 512;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (::lstat(it->path().c_str(), &st) == 0) total += uint64_t(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace cairn::pagestore::testing

#endif  // CAIRN_PAGESTORE_TEST_UTIL_H_
