#include "pagestore/page_format.h"

// The state struct is only visible with this define; the header and library come from the same
// Debian package, so its layout matches.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>

namespace cairn::pagestore {
namespace {

void PutU16(char* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}
uint16_t GetU16(const char* p) { return static_cast<uint16_t>(GetLe(p, 2)); }
uint32_t GetU32(const char* p) { return static_cast<uint32_t>(GetLe(p, 4)); }
uint64_t GetU64(const char* p) { return GetLe(p, 8); }

// XXH3-64 of the header with its checksum field read as zero (streamed, so no copy is made; the
// streaming and one-shot XXH3 digests of the same bytes are equal).
uint64_t HeaderChecksum(std::span<const char> header) {
  constexpr size_t kField = header_field::kHeaderChecksum;
  static constexpr char kZeros[8] = {};
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, header.data(), kField);
  XXH3_64bits_update(&state, kZeros, sizeof(kZeros));
  XXH3_64bits_update(&state, header.data() + kField + 8, header.size() - kField - 8);
  return XXH3_64bits_digest(&state);
}

}  // namespace

StatusOr<std::string> EncodePageHeader(std::string_view serialized_key, uint64_t page_index,
                                       uint32_t data_length,
                                       std::span<const uint64_t> chunk_checksums) {
  if (serialized_key.size() > kMaxSerializedKeyLength) {
    return InvalidArgumentError("page key of " + std::to_string(serialized_key.size()) +
                                " bytes exceeds the limit of " +
                                std::to_string(kMaxSerializedKeyLength));
  }
  if (data_length > kMaxPageDataLength) {
    return InvalidArgumentError("page data of " + std::to_string(data_length) +
                                " bytes exceeds the format limit");
  }
  if (chunk_checksums.size() != ChunkCount(data_length)) {
    return InvalidArgumentError("wrong number of chunk checksums for the page length");
  }
  uint64_t header_length = HeaderLength(serialized_key.size(), data_length);
  uint64_t data_offset = RoundUp(header_length, kPageAlignment);
  std::string out(data_offset, '\0');
  char* p = out.data();
  PutU64(p + header_field::kMagic, kPageMagic);
  PutU16(p + header_field::kVersion, kPageFormatVersion);
  PutU16(p + header_field::kFixedSize, kFixedHeaderSize);
  PutU32(p + header_field::kHeaderLength, static_cast<uint32_t>(header_length));
  PutU32(p + header_field::kDataOffset, static_cast<uint32_t>(data_offset));
  PutU32(p + header_field::kDataLength, data_length);
  PutU32(p + header_field::kChunkSize, kChecksumChunkSize);
  PutU32(p + header_field::kChunkCount, static_cast<uint32_t>(chunk_checksums.size()));
  PutU32(p + header_field::kKeyLength, static_cast<uint32_t>(serialized_key.size()));
  PutU64(p + header_field::kPageIndex, page_index);
  char* q = p + kFixedHeaderSize;
  std::memcpy(q, serialized_key.data(), serialized_key.size());
  q += serialized_key.size();
  for (uint64_t sum : chunk_checksums) {
    PutU64(q, sum);
    q += 8;
  }
  PutU64(p + header_field::kHeaderChecksum,
         HeaderChecksum(std::span<const char>(out.data(), header_length)));
  return out;
}

StatusOr<uint32_t> PeekHeaderLength(std::span<const char> prefix) {
  if (prefix.size() < kFixedHeaderSize) return CorruptionError("page header truncated");
  const char* p = prefix.data();
  if (GetU64(p + header_field::kMagic) != kPageMagic) {
    return CorruptionError("not a page file (bad magic)");
  }
  const uint16_t version = GetU16(p + header_field::kVersion);
  if (version != kPageFormatVersion && version != kPageFormatVersion1) {
    return CorruptionError("unsupported page format version " + std::to_string(version));
  }
  const uint32_t chunk_size =
      version == kPageFormatVersion1 ? kVersion1ChunkSize : kChecksumChunkSize;
  if (GetU16(p + header_field::kFixedSize) != kFixedHeaderSize) {
    return CorruptionError("bad fixed header size");
  }
  uint32_t key_length = GetU32(p + header_field::kKeyLength);
  uint32_t data_length = GetU32(p + header_field::kDataLength);
  uint32_t chunk_count = GetU32(p + header_field::kChunkCount);
  uint32_t header_length = GetU32(p + header_field::kHeaderLength);
  if (key_length > kMaxSerializedKeyLength || data_length > kMaxPageDataLength) {
    return CorruptionError("page header lengths out of range");
  }
  if (GetU32(p + header_field::kChunkSize) != chunk_size ||
      chunk_count != ChunkCount(data_length, chunk_size)) {
    return CorruptionError("page header chunk layout is inconsistent");
  }
  if (header_length != HeaderLength(key_length, data_length, chunk_size) ||
      GetU32(p + header_field::kDataOffset) != RoundUp(header_length, kPageAlignment)) {
    return CorruptionError("page header lengths are inconsistent");
  }
  if (GetU32(p + header_field::kFlags) != 0 || GetU64(p + header_field::kReserved) != 0) {
    return CorruptionError("page header has unknown flags");
  }
  return header_length;
}

StatusOr<PageHeader> DecodePageHeader(std::span<const char> bytes) {
  CAIRN_ASSIGN_OR_RETURN(uint32_t header_length, PeekHeaderLength(bytes));
  if (bytes.size() < header_length) return CorruptionError("page header truncated");
  const char* p = bytes.data();
  if (GetU64(p + header_field::kHeaderChecksum) != HeaderChecksum(bytes.first(header_length))) {
    return CorruptionError("page header checksum mismatch");
  }
  PageHeader h;
  h.header_length = header_length;
  h.data_offset = GetU32(p + header_field::kDataOffset);
  h.data_length = GetU32(p + header_field::kDataLength);
  h.page_index = GetU64(p + header_field::kPageIndex);
  h.format_version = GetU16(p + header_field::kVersion);
  h.chunk_size = GetU32(p + header_field::kChunkSize);  // Checked by PeekHeaderLength.
  uint32_t key_length = GetU32(p + header_field::kKeyLength);
  h.serialized_key.assign(p + kFixedHeaderSize, key_length);
  uint32_t chunk_count = GetU32(p + header_field::kChunkCount);
  h.chunk_checksums.resize(chunk_count);
  const char* q = p + kFixedHeaderSize + key_length;
  for (uint32_t i = 0; i < chunk_count; ++i) h.chunk_checksums[i] = GetU64(q + 8 * i);
  return h;
}

}  // namespace cairn::pagestore
