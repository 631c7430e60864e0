// Cairn worker protocol, version 1: framing and message codecs (pure code, no I/O).
// The byte layout is specified in docs/protocol.md; keep the two in step.
//
// Every message is a 24-byte frame header followed by `payload_length` bytes. All integers are
// little-endian. Strings are a u16 length followed by that many bytes (no terminator).
// Thread-safety: all functions are pure.
#ifndef CAIRN_PROTOCOL_WIRE_H_
#define CAIRN_PROTOCOL_WIRE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::protocol {

inline constexpr uint32_t kMagic = 0x4E524143;  // "CARN" in little-endian byte order.
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kFrameHeaderSize = 24;
// Largest payload accepted (a page of at most 16 MiB plus metadata); bigger frames are rejected.
inline constexpr uint32_t kMaxPayload = (16u << 20) + (64u << 10);
inline constexpr uint32_t kMaxPageSize = 16u << 20;

enum class MessageType : uint8_t {
  kHello = 1,
  kHelloReply = 2,
  kReadPage = 3,
  kReadPageReply = 4,
  kPing = 5,
  kPong = 6,
};

struct FrameHeader {
  MessageType type = MessageType::kPing;
  uint16_t flags = 0;
  uint64_t request_id = 0;
  uint32_t payload_length = 0;
};

// Writes the 24-byte header into `out` (must hold kFrameHeaderSize bytes).
void EncodeFrameHeader(const FrameHeader& header, char* out);
// Parses and validates a header: Corruption on bad magic, version, header checksum, unknown
// type or an oversized payload (the connection must then be closed).
StatusOr<FrameHeader> DecodeFrameHeader(std::span<const char, kFrameHeaderSize> bytes);

// Request flags (ReadPageRequest::flags).
inline constexpr uint32_t kFlagRefetch = 1u << 0;  // Drop any cached copy; read from the UFS.
inline constexpr uint32_t kFlagNoCache = 1u << 1;  // Serve without storing (one-pass scans).
// Serve only from the cache: on a miss the reply is OK with no data (data_length 0, source
// kUnderStorage) instead of a source read. Clients use it to look for a page on the other
// replicas before paying for the source.
inline constexpr uint32_t kFlagCacheOnly = 1u << 5;
// The request ends with one more string, `peer`: the id of a worker that has just cached the
// page. On a miss the worker first asks that peer (a cache-only read of the whole page, checksums
// verified) and reads the source only if the peer cannot serve it, so filling the other replicas
// of a page costs one source read, not one per replica. A worker that does not know the id (not
// in its membership view) reads the source.
inline constexpr uint32_t kFlagPeer = 1u << 6;
// The request comes from a worker filling its copy from this one (with kFlagCacheOnly), not from
// a reader: counted as a page sent to a peer, not as a cache hit.
inline constexpr uint32_t kFlagForPeer = 1u << 7;
// Control requests (cache management): the reply carries no data (data_length 0) and its
// `source` says whether the page WAS cached when the request arrived (kCache) or not
// (kUnderStorage). offset/length are ignored. At most one of these may be set.
inline constexpr uint32_t kFlagLoad = 1u << 2;   // Make sure the page is cached (preload).
inline constexpr uint32_t kFlagProbe = 1u << 3;  // Only report whether it is cached.
inline constexpr uint32_t kFlagDrop = 1u << 4;   // Drop the cached copy (free).
inline constexpr uint32_t kControlFlags = kFlagLoad | kFlagProbe | kFlagDrop;

struct ReadPageRequest {
  uint32_t deadline_ms = 0;  // Relative deadline; 0 = none. The worker drops late work.
  uint32_t flags = 0;
  uint32_t page_size = 0;    // The client's page size; must equal the worker's.
  uint32_t offset = 0;       // Wanted range within the page...
  uint32_t length = 0;       // ...(the reply covers the 64 KiB chunks holding it).
  uint64_t page_index = 0;
  uint64_t object_size = 0;
  std::string mount;         // Namespace mount path ("/bucket_a").
  std::string key;           // Object key relative to the mount root.
  std::string version;       // Object version the client pinned at open.
  std::string peer;          // With kFlagPeer only: a worker id that holds the page (non-empty).
};

std::string EncodeReadPageRequest(const ReadPageRequest& request);
StatusOr<ReadPageRequest> DecodeReadPageRequest(std::span<const char> payload);

// Where a page came from. kPeer: it was not cached here and was copied from the peer worker a
// PEER request named (only in replies to requests with kFlagPeer, or reads that joined one).
enum class PageSource : uint8_t { kCache = 0, kUnderStorage = 1, kPeer = 2 };

// Metadata of a ReadPageReply; on success the payload continues with data_length bytes.
struct ReadPageReplyHeader {
  StatusCode status = StatusCode::kOk;
  PageSource source = PageSource::kCache;
  std::string error_message;          // Only when status != kOk.
  uint32_t data_offset = 0;           // Offset within the page of the first data byte.
  uint32_t data_length = 0;
  std::vector<uint64_t> checksums;    // One per 64 KiB chunk of the returned data.
};

// Encodes the reply metadata (without the data bytes).
std::string EncodeReadPageReplyHeader(const ReadPageReplyHeader& reply);
// Decodes the metadata; *consumed is set to its encoded size (data follows).
StatusOr<ReadPageReplyHeader> DecodeReadPageReplyHeader(std::span<const char> payload,
                                                        size_t* consumed);

struct HelloReply {
  uint32_t protocol_version = kVersion;
  uint32_t page_size = 0;
  std::string worker_id;
  // For short-circuit reads by clients on the same machine: a random token the worker wrote to
  // "<dir>/INSTANCE" in each of its cache folders, and those folders in the store's order. A
  // client that finds the same token in the same files shares the worker's file system.
  std::string instance_token;
  std::vector<std::string> cache_dirs;
};
std::string EncodeHelloReply(const HelloReply& reply);
StatusOr<HelloReply> DecodeHelloReply(std::span<const char> payload);

// The chunk-aligned byte range [begin, end) of a page that a reply for (offset, length) carries,
// for a page holding `page_length` bytes. Pure; used by both ends so they always agree.
struct ByteRange {
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t size() const { return end - begin; }
};
ByteRange AlignedRange(uint32_t offset, uint32_t length, uint32_t page_length);

// Bytes held by page `page_index` of an object of `object_size` bytes (0 past the end, for any
// index: never overflows).
uint32_t PageLength(uint64_t object_size, uint64_t page_index, uint32_t page_size);

}  // namespace cairn::protocol

#endif  // CAIRN_PROTOCOL_WIRE_H_
