// Fuzzes the page file header decoder: page files are read back from local disks after a crash,
// a bad disk or a hand edit, so their bytes are untrusted. Any bytes must decode to a header or
// Corruption; a decoded header of the current version must re-encode to the same bytes (the
// decoder accepts only what the encoder writes), and one of version 1 (read, no longer written)
// must hold one checksum per 64 KiB chunk.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "pagestore/page_format.h"

using namespace cairn::pagestore;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  if (size >= kFixedHeaderSize) (void)PeekHeaderLength(bytes);
  auto header = DecodePageHeader(bytes);
  if (!header.ok()) return 0;
  if (header->header_length > size || header->data_offset < header->header_length) std::abort();
  if (header->format_version == kPageFormatVersion1) {
    if (header->chunk_size != kVersion1ChunkSize ||
        header->chunk_checksums.size() !=
            cairn::ChunkCount(header->data_length, kVersion1ChunkSize)) {
      std::abort();
    }
    return 0;
  }
  auto again = EncodePageHeader(header->serialized_key, header->page_index, header->data_length,
                                header->chunk_checksums);
  if (!again.ok() || again->size() != header->data_offset ||
      std::memcmp(again->data(), data, header->header_length) != 0) {
    std::abort();
  }
  return 0;
}
