// Fuzzes every decoder of the worker protocol (src/protocol/wire.h) with one input: whatever a
// peer can send must decode to a value or an error, never crash, and a decoded request must
// encode back to the same bytes and give ranges inside its page.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "protocol/wire.h"

using namespace cairn::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  if (size >= kFrameHeaderSize) {
    (void)DecodeFrameHeader(bytes.first<kFrameHeaderSize>());
  }
  auto request = DecodeReadPageRequest(bytes);
  if (request.ok()) {
    if (EncodeReadPageRequest(*request) != std::string(bytes.begin(), bytes.end())) std::abort();
    uint32_t length = PageLength(request->object_size, request->page_index, request->page_size);
    if (length == 0 || length > request->page_size) std::abort();
    ByteRange range = AlignedRange(request->offset, request->length, length);
    if (range.begin > range.end || range.end > length) std::abort();
  }
  size_t consumed = 0;
  auto reply = DecodeReadPageReplyHeader(bytes, &consumed);
  if (reply.ok() && consumed > size) std::abort();
  (void)DecodeHelloReply(bytes);
  return 0;
}
