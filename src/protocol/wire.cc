#include "protocol/wire.h"

#include <algorithm>

#include "common/checksum.h"
#include "protocol/codec.h"

namespace cairn::protocol {
namespace {

constexpr size_t kMaxChecksums = kMaxPageSize / kChecksumChunkSize + 1;

uint32_t HeaderCheck(const char* header20) {
  return static_cast<uint32_t>(Hash64(std::string_view(header20, 20)));
}

bool KnownType(uint8_t t) { return t >= 1 && t <= 6; }

}  // namespace

void EncodeFrameHeader(const FrameHeader& header, char* out) {
  ByteWriter w;
  w.U32(kMagic);
  w.U8(kVersion);
  w.U8(static_cast<uint8_t>(header.type));
  w.U16(header.flags);
  w.U64(header.request_id);
  w.U32(header.payload_length);
  std::string bytes = w.Take();
  uint32_t check = HeaderCheck(bytes.data());
  std::memcpy(out, bytes.data(), 20);
  std::memcpy(out + 20, &check, 4);
}

StatusOr<FrameHeader> DecodeFrameHeader(std::span<const char, kFrameHeaderSize> bytes) {
  ByteReader r(bytes);
  uint32_t magic = 0, length = 0, check = 0;
  uint8_t version = 0, type = 0;
  FrameHeader h;
  r.U32(&magic);
  r.U8(&version);
  r.U8(&type);
  r.U16(&h.flags);
  r.U64(&h.request_id);
  r.U32(&length);
  r.U32(&check);
  if (magic != kMagic) return CorruptionError("bad frame magic");
  if (version != kVersion) {
    return CorruptionError("unsupported protocol version " + std::to_string(version));
  }
  if (check != HeaderCheck(bytes.data())) return CorruptionError("frame header checksum mismatch");
  if (!KnownType(type)) return CorruptionError("unknown message type " + std::to_string(type));
  if (length > kMaxPayload) {
    return CorruptionError("frame payload too large: " + std::to_string(length));
  }
  h.type = static_cast<MessageType>(type);
  h.payload_length = length;
  return h;
}

std::string EncodeReadPageRequest(const ReadPageRequest& q) {
  ByteWriter w;
  w.U32(q.deadline_ms);
  w.U32(q.flags);
  w.U32(q.page_size);
  w.U32(q.offset);
  w.U32(q.length);
  w.U64(q.page_index);
  w.U64(q.object_size);
  w.Str(q.mount);
  w.Str(q.key);
  w.Str(q.version);
  if (q.flags & kFlagPeer) w.Str(q.peer);
  return w.Take();
}

StatusOr<ReadPageRequest> DecodeReadPageRequest(std::span<const char> payload) {
  ByteReader r(payload);
  ReadPageRequest q;
  bool ok = r.U32(&q.deadline_ms) && r.U32(&q.flags) && r.U32(&q.page_size) &&
            r.U32(&q.offset) && r.U32(&q.length) && r.U64(&q.page_index) &&
            r.U64(&q.object_size) && r.Str(&q.mount) && r.Str(&q.key) && r.Str(&q.version);
  if (ok && (q.flags & kFlagPeer)) ok = r.Str(&q.peer);
  if (!ok) return CorruptionError("truncated ReadPage request");
  if (r.remaining() != 0) return CorruptionError("trailing bytes after ReadPage request");
  if (q.page_size == 0 || q.page_size > kMaxPageSize || q.page_size % kChecksumChunkSize != 0) {
    return InvalidArgumentError("bad page size " + std::to_string(q.page_size));
  }
  if ((q.flags & kFlagPeer) && q.peer.empty()) {
    return InvalidArgumentError("PEER flag without a peer worker id");
  }
  if (q.length == 0 || static_cast<uint64_t>(q.offset) + q.length > q.page_size) {
    return InvalidArgumentError("bad range within page");
  }
  uint32_t page_length = PageLength(q.object_size, q.page_index, q.page_size);
  if (page_length == 0 || q.offset >= page_length) {
    return InvalidArgumentError("page range past end of object");
  }
  return q;
}

std::string EncodeReadPageReplyHeader(const ReadPageReplyHeader& reply) {
  ByteWriter w;
  w.U8(static_cast<uint8_t>(reply.status));
  w.U8(static_cast<uint8_t>(reply.source));
  w.U16(0);
  if (reply.status != StatusCode::kOk) {
    w.Str(std::string_view(reply.error_message).substr(0, 60000));
    return w.Take();
  }
  w.U32(reply.data_offset);
  w.U32(reply.data_length);
  w.U32(static_cast<uint32_t>(reply.checksums.size()));
  for (uint64_t c : reply.checksums) w.U64(c);
  return w.Take();
}

StatusOr<ReadPageReplyHeader> DecodeReadPageReplyHeader(std::span<const char> payload,
                                                        size_t* consumed) {
  ByteReader r(payload);
  ReadPageReplyHeader h;
  uint8_t status = 0, source = 0;
  uint16_t reserved = 0;
  if (!r.U8(&status) || !r.U8(&source) || !r.U16(&reserved)) {
    return CorruptionError("truncated ReadPage reply");
  }
  if (status > static_cast<uint8_t>(StatusCode::kInternal) || source > static_cast<uint8_t>(PageSource::kPeer)) {
    return CorruptionError("bad ReadPage reply status");
  }
  h.status = static_cast<StatusCode>(status);
  h.source = static_cast<PageSource>(source);
  if (h.status != StatusCode::kOk) {
    if (!r.Str(&h.error_message)) return CorruptionError("truncated ReadPage error reply");
    *consumed = r.position();
    return h;
  }
  uint32_t n = 0;
  if (!r.U32(&h.data_offset) || !r.U32(&h.data_length) || !r.U32(&n)) {
    return CorruptionError("truncated ReadPage reply");
  }
  if (n > kMaxChecksums || n != ChunkCount(h.data_length)) {
    return CorruptionError("ReadPage reply checksum count does not match its length");
  }
  h.checksums.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (!r.U64(&h.checksums[i])) return CorruptionError("truncated ReadPage checksums");
  }
  *consumed = r.position();
  return h;
}

std::string EncodeHelloReply(const HelloReply& reply) {
  ByteWriter w;
  w.U32(reply.protocol_version);
  w.U32(reply.page_size);
  w.Str(reply.worker_id);
  w.Str(reply.instance_token);
  w.U16(static_cast<uint16_t>(reply.cache_dirs.size()));
  for (const std::string& d : reply.cache_dirs) w.Str(d);
  return w.Take();
}

StatusOr<HelloReply> DecodeHelloReply(std::span<const char> payload) {
  ByteReader r(payload);
  HelloReply h;
  uint16_t dirs = 0;
  if (!r.U32(&h.protocol_version) || !r.U32(&h.page_size) || !r.Str(&h.worker_id) ||
      !r.Str(&h.instance_token) || !r.U16(&dirs)) {
    return CorruptionError("truncated Hello reply");
  }
  h.cache_dirs.resize(dirs);
  for (std::string& d : h.cache_dirs) {
    if (!r.Str(&d)) return CorruptionError("truncated Hello reply");
  }
  return h;
}

ByteRange AlignedRange(uint32_t offset, uint32_t length, uint32_t page_length) {
  ByteRange r;
  r.begin = std::min(offset - offset % kChecksumChunkSize, page_length);
  uint64_t end = static_cast<uint64_t>(offset) + length;
  uint64_t aligned_end = (end + kChecksumChunkSize - 1) / kChecksumChunkSize * kChecksumChunkSize;
  r.end = static_cast<uint32_t>(std::min<uint64_t>(aligned_end, page_length));
  return r;
}

uint32_t PageLength(uint64_t object_size, uint64_t page_index, uint32_t page_size) {
  // Validated before the multiplication: a huge index from a peer must not wrap around to a
  // small offset (page 2^46 of 256 KiB pages would otherwise be page 0).
  if (page_size == 0 || page_index >= object_size / page_size + 1) return 0;
  uint64_t start = page_index * page_size;
  if (start >= object_size) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(page_size, object_size - start));
}

}  // namespace cairn::protocol
