// The page file format, version 2 (described for humans in docs/pagestore.md; keep both in sync).
//
//   [fixed header, 64 bytes][key bytes][chunk checksums, 8 bytes each][zero padding][page data]
//   ^ offset 0                                               4096-aligned data_offset ^
//
// All integers are little-endian. The header checksum (XXH3-64) covers every header byte from
// offset 0 to header_length with the checksum field itself taken as zero; the padding is not
// covered (it is never read). Page data is covered by the per-chunk checksums only, which readers
// verify end to end.
//
// Pure code: encoding and decoding of bytes, no I/O. Thread-safe.
#ifndef CAIRN_PAGESTORE_PAGE_FORMAT_H_
#define CAIRN_PAGESTORE_PAGE_FORMAT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/checksum.h"
#include "common/status.h"

namespace cairn::pagestore {

inline constexpr uint64_t kPageMagic = 0x4741504e52494143ULL;  // "CAIRNPAG" read as LE u64.
inline constexpr uint16_t kPageFormatVersion = 2;
// Version 1 files, written by earlier builds, are still read: their chunks are 64 KiB.
inline constexpr uint16_t kPageFormatVersion1 = 1;
inline constexpr uint32_t kVersion1ChunkSize = 64 * 1024;
inline constexpr uint32_t kFixedHeaderSize = 64;
// File offsets of data are multiples of this (O_DIRECT-friendly, page-cache aligned sendfile).
inline constexpr uint32_t kPageAlignment = 4096;
// Bounds that keep a hostile or damaged header from making us allocate gigabytes.
inline constexpr uint32_t kMaxSerializedKeyLength = 16 * 1024;
inline constexpr uint32_t kMaxPageDataLength = 1u << 30;

// Field offsets inside the fixed header (see docs/pagestore.md for meanings).
namespace header_field {
inline constexpr size_t kMagic = 0;            // u64
inline constexpr size_t kVersion = 8;          // u16
inline constexpr size_t kFixedSize = 10;       // u16, = kFixedHeaderSize
inline constexpr size_t kHeaderLength = 12;    // u32
inline constexpr size_t kDataOffset = 16;      // u32
inline constexpr size_t kDataLength = 20;      // u32
inline constexpr size_t kChunkSize = 24;       // u32
inline constexpr size_t kChunkCount = 28;      // u32
inline constexpr size_t kKeyLength = 32;       // u32
inline constexpr size_t kFlags = 36;           // u32, 0
inline constexpr size_t kPageIndex = 40;       // u64
inline constexpr size_t kHeaderChecksum = 48;  // u64
inline constexpr size_t kReserved = 56;        // u64, 0
}  // namespace header_field

inline constexpr uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// Header bytes (without padding) for a key of `key_length` bytes and `data_length` bytes of data
// checksummed in chunks of `chunk_size`.
inline uint64_t HeaderLength(uint64_t key_length, uint64_t data_length,
                             uint32_t chunk_size = kChecksumChunkSize) {
  return kFixedHeaderSize + key_length + uint64_t{8} * ChunkCount(data_length, chunk_size);
}

// A decoded header.
struct PageHeader {
  std::string serialized_key;  // PageKey::Serialize() of the page it holds.
  uint64_t page_index = 0;
  uint32_t header_length = 0;  // Fixed header + key + checksums, before padding.
  uint32_t data_offset = 0;    // RoundUp(header_length, kPageAlignment).
  uint32_t data_length = 0;
  uint16_t format_version = kPageFormatVersion;
  uint32_t chunk_size = kChecksumChunkSize;  // kVersion1ChunkSize in a version-1 header.
  std::vector<uint64_t> chunk_checksums;     // One per chunk_size chunk of data.

  uint64_t file_size() const { return uint64_t{data_offset} + data_length; }
};

// Builds the header and padding of a page file: the returned string is exactly data_offset bytes,
// to be followed by the data. Returns InvalidArgument if the key or data exceed the format's
// bounds or `chunk_checksums` does not hold ChunkCount(data_length) entries.
StatusOr<std::string> EncodePageHeader(std::string_view serialized_key, uint64_t page_index,
                                       uint32_t data_length,
                                       std::span<const uint64_t> chunk_checksums);

// Reads the fixed part of a header (`prefix` must hold at least kFixedHeaderSize bytes) and
// returns header_length, the number of bytes DecodePageHeader needs. Corruption if the magic,
// version or lengths are not those of a valid version-2 (or version-1) header; the header
// checksum is not checked yet (that needs the whole header).
StatusOr<uint32_t> PeekHeaderLength(std::span<const char> prefix);

// Decodes and fully checks a header; `bytes` holds at least header_length bytes (more is fine).
// Corruption on any inconsistency or a header checksum mismatch.
StatusOr<PageHeader> DecodePageHeader(std::span<const char> bytes);

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_PAGE_FORMAT_H_
