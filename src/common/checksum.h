// Checksums and content hashes used end to end (page store, wire protocol, client).
//
// Page data is checksummed per chunk of kChecksumChunkSize bytes with XXH3-64, so that a reader of
// a small range verifies only the chunks it touches, while the worker can still send stored bytes
// straight from the page file (sendfile) with the stored checksums alongside.
#ifndef CAIRN_COMMON_CHECKSUM_H_
#define CAIRN_COMMON_CHECKSUM_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

// 4 KiB: a 4 KiB random read reads, sends and verifies 4 KiB, not the 64 KiB chunk of page format
// 1 and protocol v5 (measured in docs/benchmarks.md, "Checksum chunks of 4 KiB"). A 1 MiB page
// carries 256 checksums (2 KiB, 0.2 %).
inline constexpr uint32_t kChecksumChunkSize = 4 * 1024;
// Page sizes are multiples of this (configuration, protocol): independent of the chunk size, so
// the rule users see did not change with it.
inline constexpr uint32_t kPageSizeUnit = 64 * 1024;

uint64_t Checksum64(std::span<const char> data);
uint64_t Hash64(std::string_view data);

// Hash64 of data given in pieces: Update with each piece in order, then Digest() equals
// Hash64 of their concatenation. For data read in small buffers (that stay in the CPU's cache)
// instead of one large one. Not thread-safe; not copyable.
class Hash64Stream {
 public:
  Hash64Stream();
  ~Hash64Stream();
  Hash64Stream(const Hash64Stream&) = delete;
  Hash64Stream& operator=(const Hash64Stream&) = delete;
  void Update(std::string_view piece);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t (xxhash.h stays out of this header).
};

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const Hash128&) const = default;
  std::string ToHex() const;  // 32 lowercase hex digits, high then low.
};
Hash128 Hash128Of(std::string_view data);

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.low ^ (h.high * 31)); }
};

// Number of chunks of `chunk_size` (> 0) bytes covering `length` bytes.
inline uint32_t ChunkCount(uint64_t length, uint32_t chunk_size) {
  return static_cast<uint32_t>((length + chunk_size - 1) / chunk_size);
}
inline uint32_t ChunkCount(uint64_t length) { return ChunkCount(length, kChecksumChunkSize); }

// One XXH3-64 per `chunk_size` chunk of `data` (the last chunk may be short).
std::vector<uint64_t> ChunkChecksums(std::span<const char> data,
                                     uint32_t chunk_size = kChecksumChunkSize);

}  // namespace cairn

#endif  // CAIRN_COMMON_CHECKSUM_H_
