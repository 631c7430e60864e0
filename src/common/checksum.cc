#include "common/checksum.h"

#include <xxhash.h>

#include <cstdio>
#include <new>

namespace cairn {

uint64_t Checksum64(std::span<const char> data) { return XXH3_64bits(data.data(), data.size()); }

uint64_t Hash64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

Hash64Stream::Hash64Stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Hash64Stream::~Hash64Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hash64Stream::Update(std::string_view piece) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), piece.data(), piece.size());
}

uint64_t Hash64Stream::Digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

Hash128 Hash128Of(std::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return Hash128{h.high64, h.low64};
}

std::string Hash128::ToHex() const {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return std::string(buf, 32);
}

std::vector<uint64_t> ChunkChecksums(std::span<const char> data, uint32_t chunk_size) {
  std::vector<uint64_t> out;
  out.reserve(ChunkCount(data.size(), chunk_size));
  for (size_t off = 0; off < data.size(); off += chunk_size) {
    size_t n = std::min<size_t>(chunk_size, data.size() - off);
    out.push_back(Checksum64(data.subspan(off, n)));
  }
  return out;
}

}  // namespace cairn
