// Fuzzes every decoder of the worker protocol (src/protocol/wire.h) with one input: whatever a
// peer can send must decode to a value or an error, never crash, and a decoded request must
// encode back to the same bytes and name a page inside its object (a write request: a path or a
// handle, and a write inside kMaxWriteOffset whose data lies in the input).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "common/checksum.h"
#include "protocol/wire.h"

using namespace cairn::protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the message type the rest claims to be (0..32: kKeepWrite is the
  // last; 0 is no type).
  auto type = static_cast<MessageType>(data[0] % 33);
  std::span<const char> bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (bytes.size() >= kFrameHeaderSize) {
    (void)DecodeFrameHeader(bytes.first<kFrameHeaderSize>());
  }
  auto request = DecodeRequest(type, bytes);
  if (request.ok()) {
    if (TypeOf(*request) != type) std::abort();
    if (EncodeRequest(*request) != std::string(bytes.begin(), bytes.end())) std::abort();
    const PageRef& page = BaseOf(*request).page;
    uint32_t length = PageLengthOf(page);
    if (length == 0 || length > page.page_size) std::abort();
    if (const auto* read = std::get_if<ReadPageRequest>(&*request)) {
      ByteRange range = AlignedRange(read->offset, read->length, length);
      if (range.begin > range.end || range.end > length || read->offset >= length) std::abort();
    }
  }
  std::span<const char> view;
  auto reply = DecodePageReply(bytes, &view);
  if (reply.ok() &&
      (view.data() < bytes.data() || view.data() + view.size() > bytes.data() + bytes.size())) {
    std::abort();
  }
  auto metadata = DecodeMetadataRequest(type, bytes);
  if (metadata.ok()) {
    if (TypeOf(*metadata) != type) std::abort();
    if (EncodeMetadataRequest(*metadata) != std::string(bytes.begin(), bytes.end())) std::abort();
    if (PathOf(*metadata).empty() || PathOf(*metadata)[0] != '/') std::abort();
  }
  auto listing = DecodeMetadataReply(bytes);
  if (listing.ok()) {
    if (listing->entries.size() > kMaxListEntries) std::abort();
    for (const DirEntry& e : listing->entries) {
      if (e.name.find('/') != std::string::npos || e.name == "..") std::abort();
    }
    if (listing->status == cairn::StatusCode::kOk &&
        EncodeMetadataReply(*listing) != std::string(bytes.begin(), bytes.end())) {
      std::abort();
    }
  }
  auto write = DecodeWriteRequest(type, bytes);
  if (write.ok()) {
    if (!IsWriteRequest(type) || TypeOf(*write) != type) std::abort();
    std::string encoded = EncodeWriteRequest(*write);
    if (const auto* page = std::get_if<WritePageRequest>(&*write)) {
      // The data is the input's tail, not a copy, and its checksums cover it.
      if (page->data.empty() || page->data.size() > kMaxWriteData ||
          page->data.data() + page->data.size() != bytes.data() + bytes.size() ||
          page->checksums.size() != cairn::ChunkCount(page->data.size()) ||
          page->offset + page->data.size() > kMaxWriteOffset) {
        std::abort();
      }
      encoded.append(page->data.data(), page->data.size());
    }
    if (encoded != std::string(bytes.begin(), bytes.end())) std::abort();
    const std::string* path = nullptr;
    if (const auto* open = std::get_if<OpenWriteRequest>(&*write)) path = &open->path;
    if (const auto* remove = std::get_if<RemovePathRequest>(&*write)) path = &remove->path;
    if (const auto* make_dir = std::get_if<MakeDirRequest>(&*write)) path = &make_dir->path;
    if (const auto* sync = std::get_if<SyncPathRequest>(&*write)) path = &sync->path;
    if (const auto* rename = std::get_if<RenameRequest>(&*write)) {
      if (rename->to.empty() || rename->to[0] != '/') std::abort();
      path = &rename->from;
    }
    if (const auto* hand_over = std::get_if<HandOverRequest>(&*write)) {
      if (hand_over->to.empty() || hand_over->to[0] != '/') std::abort();
      path = &hand_over->from;
    }
    if (path != nullptr && (path->empty() || (*path)[0] != '/')) std::abort();
    bool has_handle = type != MessageType::kOpenWrite && type != MessageType::kRemovePath &&
                      type != MessageType::kMakeDir && type != MessageType::kRename &&
                      type != MessageType::kSyncPath && type != MessageType::kHandOver;
    if (has_handle != (HandleOf(*write) != 0)) std::abort();
  }
  auto write_reply = DecodeWriteReply(bytes);
  if (write_reply.ok()) {
    // Error messages may be cut when encoded; everything else round-trips.
    if (write_reply->status == cairn::StatusCode::kOk &&
        EncodeWriteReply(*write_reply) != std::string(bytes.begin(), bytes.end())) {
      std::abort();
    }
    auto again = DecodeWriteReply(EncodeWriteReply(*write_reply));
    if (!again.ok() || again->status != write_reply->status) std::abort();
  }
  (void)DecodePageReplyMeta(bytes);
  (void)DecodeControlReply(bytes);
  (void)DecodeHelloReply(bytes);
  (void)DecodeHelloRequest(bytes);
  (void)DecodeVersionMismatch(bytes);
  return 0;
}
