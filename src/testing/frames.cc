#include "testing/frames.h"

#include "common/checksum.h"

#include <array>
#include <span>

namespace cairn::testing {

Status SendFrame(net::Stream* stream, protocol::MessageType type, uint64_t id,
                 const std::string& payload) {
  std::array<char, protocol::kFrameHeaderSize> raw;
  protocol::EncodeFrameHeader({type, 0, id, static_cast<uint32_t>(payload.size())}, raw.data());
  std::array<std::span<const char>, 2> bufs{std::span<const char>(raw),
                                            std::span<const char>(payload)};
  return stream->WriteAll(bufs);
}

StatusOr<std::pair<protocol::FrameHeader, std::string>> ReadFrame(net::Stream* stream) {
  std::array<char, protocol::kFrameHeaderSize> raw;
  CAIRN_RETURN_IF_ERROR(stream->ReadFull(raw));
  CAIRN_ASSIGN_OR_RETURN(protocol::FrameHeader h, protocol::DecodeFrameHeader(raw));
  std::string payload(h.payload_length, '\0');
  CAIRN_RETURN_IF_ERROR(stream->ReadFull(payload));
  return std::make_pair(h, std::move(payload));
}

Status SendRequest(net::Stream* stream, uint64_t id, const protocol::Request& request) {
  return SendFrame(stream, protocol::TypeOf(request), id, protocol::EncodeRequest(request));
}

protocol::WritePageRequest WritePageOf(uint64_t handle, uint64_t offset, std::string_view data) {
  protocol::WritePageRequest r;
  r.handle = handle;
  r.offset = offset;
  r.data = std::span<const char>(data.data(), data.size());
  r.checksums = ChunkChecksums(r.data);
  return r;
}

}  // namespace cairn::testing
