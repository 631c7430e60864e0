#include "protocol/wire.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "common/checksum.h"
#include "protocol/codec.h"

namespace cairn::protocol {

std::string PendingVersion(uint64_t epoch, uint64_t id) {
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%.*s%" PRIx64 "-%" PRIx64,
                        static_cast<int>(kPendingVersionPrefix.size()),
                        kPendingVersionPrefix.data(), epoch, id);
  return std::string(buf, static_cast<size_t>(n));
}

bool IsPendingVersion(std::string_view version) {
  return version.starts_with(kPendingVersionPrefix);
}

StatusOr<PendingVersionParts> ParsePendingVersion(std::string_view version) {
  auto bad = [&] { return InvalidArgumentError("not a pending version: " + std::string(version)); };
  if (!IsPendingVersion(version)) return bad();
  std::string_view rest = version.substr(kPendingVersionPrefix.size());
  auto hex = [](std::string_view text, uint64_t* out) {
    if (text.empty() || text.size() > 16) return false;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
    return ec == std::errc() && end == text.data() + text.size() &&
           std::all_of(text.begin(), text.end(), [](char c) { return c < 'A' || c > 'F'; });
  };
  const size_t dash = rest.find('-');
  PendingVersionParts parts;
  if (dash == std::string_view::npos || !hex(rest.substr(0, dash), &parts.epoch) ||
      !hex(rest.substr(dash + 1), &parts.id)) {
    return bad();
  }
  return parts;
}
namespace {

constexpr size_t kMaxChecksums = kMaxPageSize / kChecksumChunkSize + 1;
constexpr size_t kMaxErrorMessage = 60000;

uint32_t HeaderCheck(const char* header20) {
  return static_cast<uint32_t>(Hash64(std::string_view(header20, 20)));
}

// Every type from kHello to kKeepWrite is in use (v5 took 15 and 19..25, v7 26 and 27, v8 28,
// v9 29, v11 30, v12 31, v13 32).
bool KnownType(uint8_t t) { return t >= 1 && t <= static_cast<uint8_t>(MessageType::kKeepWrite); }

// ReadPage option bits (the only bit field left, and local to that one message).
constexpr uint8_t kReadRefetch = 1u << 0;
constexpr uint8_t kReadNoCache = 1u << 1;

void PutBase(ByteWriter& w, const RequestBase& b) {
  w.U32(b.deadline_ms);
  w.U32(b.page.page_size);
  w.U64(b.page.page_index);
  w.U64(b.page.object_size);
  w.Str(b.page.mount);
  w.Str(b.page.key);
  w.Str(b.page.version);
}

bool GetBase(ByteReader& r, RequestBase* b) {
  return r.U32(&b->deadline_ms) && r.U32(&b->page.page_size) && r.U64(&b->page.page_index) &&
         r.U64(&b->page.object_size) && r.Str(&b->page.mount) && r.Str(&b->page.key) &&
         r.Str(&b->page.version);
}

Status ValidatePage(const PageRef& page) {
  if (page.page_size == 0 || page.page_size > kMaxPageSize || page.page_size % kPageSizeUnit != 0) {
    return InvalidArgumentError("bad page size " + std::to_string(page.page_size));
  }
  if (page.mount.empty() || page.key.empty()) {
    return InvalidArgumentError("a request must name a mount and a key");
  }
  if (PageLengthOf(page) == 0) return InvalidArgumentError("page past end of object");
  return Status::Ok();
}

Status ValidateRange(const PageRef& page, uint32_t offset, uint32_t length) {
  if (length == 0 || static_cast<uint64_t>(offset) + length > page.page_size) {
    return InvalidArgumentError("bad range within page");
  }
  if (offset >= PageLengthOf(page)) return InvalidArgumentError("page range past end of object");
  return Status::Ok();
}

template <typename T>
StatusOr<Request> Finish(ByteReader& r, bool ok, T request, const char* name) {
  if (!ok) return CorruptionError(std::string("truncated ") + name + " request");
  if (r.remaining() != 0) return CorruptionError(std::string("trailing bytes after ") + name);
  CAIRN_RETURN_IF_ERROR(ValidatePage(request.page));
  return Request(std::move(request));
}

struct Encoder {
  ByteWriter& w;
  void operator()(const ReadPageRequest& q) {
    PutBase(w, q);
    w.U32(q.offset);
    w.U32(q.length);
    w.U8(static_cast<uint8_t>((q.refetch ? kReadRefetch : 0) | (q.no_cache ? kReadNoCache : 0)));
  }
  void operator()(const LookupPageRequest& q) {
    PutBase(w, q);
    w.U32(q.offset);
    w.U32(q.length);
  }
  void operator()(const CopyFromPeerRequest& q) {
    PutBase(w, q);
    w.Str(q.peer);
  }
  void operator()(const RequestBase& q) { PutBase(w, q); }
};

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

uint8_t FrameVersion(std::span<const char, kFrameHeaderSize> bytes) {
  return static_cast<uint8_t>(bytes[4]);
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
  if (magic != kMagic) return CorruptionError("bad frame magic (not a Cairn peer)");
  if (check != HeaderCheck(bytes.data())) return CorruptionError("frame header checksum mismatch");
  if (version < kMinVersion || version > kVersion) {
    return FailedPreconditionError("protocol version mismatch: the peer speaks Cairn protocol v" +
                                   std::to_string(version) + ", this build speaks v" +
                                   std::to_string(kMinVersion) + "-v" + std::to_string(kVersion) +
                                   " (upgrade the older side)");
  }
  if (!KnownType(type)) return CorruptionError("unknown message type " + std::to_string(type));
  if (length > kMaxPayload) {
    return CorruptionError("frame payload too large: " + std::to_string(length));
  }
  h.type = static_cast<MessageType>(type);
  h.payload_length = length;
  return h;
}

std::string EncodeHelloRequest(const HelloRequest& hello) {
  ByteWriter w;
  w.U32(hello.min_version);
  w.U32(hello.max_version);
  w.Str(hello.token);
  return w.Take();
}

StatusOr<HelloRequest> DecodeHelloRequest(std::span<const char> payload) {
  ByteReader r(payload);
  HelloRequest h;
  if (!r.U32(&h.min_version) || !r.U32(&h.max_version) || !r.Str(&h.token) || r.remaining() != 0 ||
      h.token.size() > kMaxHelloToken) {
    return CorruptionError("malformed Hello");
  }
  return h;
}

std::string EncodeVersionMismatch(const VersionMismatch& mismatch) {
  ByteWriter w;
  w.U32(mismatch.min_version);
  w.U32(mismatch.max_version);
  w.Str(std::string_view(mismatch.message).substr(0, kMaxErrorMessage));
  return w.Take();
}

StatusOr<VersionMismatch> DecodeVersionMismatch(std::span<const char> payload) {
  ByteReader r(payload);
  VersionMismatch m;
  if (!r.U32(&m.min_version) || !r.U32(&m.max_version) || !r.Str(&m.message)) {
    return CorruptionError("malformed VersionMismatch");
  }
  return m;
}

MessageType TypeOf(const Request& request) {
  static constexpr MessageType kTypes[] = {MessageType::kReadPage,     MessageType::kLookupPage,
                                           MessageType::kPeerRead,     MessageType::kLoadPage,
                                           MessageType::kCopyFromPeer, MessageType::kProbePage,
                                           MessageType::kDropPage};
  return kTypes[request.index()];
}

const RequestBase& BaseOf(const Request& request) {
  return std::visit([](const auto& q) -> const RequestBase& { return q; }, request);
}

RequestBase& BaseOf(Request& request) {
  return std::visit([](auto& q) -> RequestBase& { return q; }, request);
}

bool WantsData(MessageType request_type) {
  return request_type == MessageType::kReadPage || request_type == MessageType::kLookupPage ||
         request_type == MessageType::kPeerRead;
}

std::string EncodeRequest(const Request& request) {
  ByteWriter w;
  std::visit(Encoder{w}, request);
  return w.Take();
}

StatusOr<Request> DecodeRequest(MessageType type, std::span<const char> payload) {
  ByteReader r(payload);
  switch (type) {
    case MessageType::kReadPage: {
      ReadPageRequest q;
      uint8_t options = 0;
      bool ok = GetBase(r, &q) && r.U32(&q.offset) && r.U32(&q.length) && r.U8(&options);
      q.refetch = options & kReadRefetch;
      q.no_cache = options & kReadNoCache;
      if (ok && (options & ~(kReadRefetch | kReadNoCache)) != 0) {
        return CorruptionError("unknown ReadPage options " + std::to_string(options));
      }
      CAIRN_ASSIGN_OR_RETURN(Request out, Finish(r, ok, std::move(q), "ReadPage"));
      const auto& read = std::get<ReadPageRequest>(out);
      CAIRN_RETURN_IF_ERROR(ValidateRange(read.page, read.offset, read.length));
      return out;
    }
    case MessageType::kLookupPage: {
      LookupPageRequest q;
      bool ok = GetBase(r, &q) && r.U32(&q.offset) && r.U32(&q.length);
      CAIRN_ASSIGN_OR_RETURN(Request out, Finish(r, ok, std::move(q), "LookupPage"));
      const auto& lookup = std::get<LookupPageRequest>(out);
      CAIRN_RETURN_IF_ERROR(ValidateRange(lookup.page, lookup.offset, lookup.length));
      return out;
    }
    case MessageType::kPeerRead: {
      PeerReadRequest q;
      bool ok = GetBase(r, &q);
      return Finish(r, ok, std::move(q), "PeerRead");
    }
    case MessageType::kLoadPage: {
      LoadPageRequest q;
      bool ok = GetBase(r, &q);
      return Finish(r, ok, std::move(q), "LoadPage");
    }
    case MessageType::kCopyFromPeer: {
      CopyFromPeerRequest q;
      bool ok = GetBase(r, &q) && r.Str(&q.peer);
      if (ok && q.peer.empty()) return InvalidArgumentError("CopyFromPeer without a peer id");
      return Finish(r, ok, std::move(q), "CopyFromPeer");
    }
    case MessageType::kProbePage: {
      ProbePageRequest q;
      bool ok = GetBase(r, &q);
      return Finish(r, ok, std::move(q), "ProbePage");
    }
    case MessageType::kDropPage: {
      DropPageRequest q;
      bool ok = GetBase(r, &q);
      return Finish(r, ok, std::move(q), "DropPage");
    }
    default:
      return CorruptionError("message type " + std::to_string(static_cast<int>(type)) +
                             " is not a request");
  }
}

namespace {

void PutOutcome(ByteWriter& w, StatusCode status, PageSource source, const std::string& error) {
  w.U8(static_cast<uint8_t>(status));
  w.U8(static_cast<uint8_t>(source));
  w.U16(0);
  if (status != StatusCode::kOk) w.Str(std::string_view(error).substr(0, kMaxErrorMessage));
}

// Reads status, source and (for errors) the message. Corruption if malformed.
Status GetOutcome(ByteReader& r, StatusCode* status, PageSource* source, std::string* error) {
  uint8_t s = 0, src = 0;
  uint16_t reserved = 0;
  if (!r.U8(&s) || !r.U8(&src) || !r.U16(&reserved)) return CorruptionError("truncated reply");
  if (s > static_cast<uint8_t>(StatusCode::kInternal) ||
      src > static_cast<uint8_t>(PageSource::kPeer)) {
    return CorruptionError("bad reply status or source");
  }
  *status = static_cast<StatusCode>(s);
  *source = static_cast<PageSource>(src);
  if (*status != StatusCode::kOk && !r.Str(error)) {
    return CorruptionError("truncated error reply");
  }
  return Status::Ok();
}

}  // namespace

std::string EncodePageReplyMeta(const PageReplyMeta& reply) {
  ByteWriter w;
  PutOutcome(w, reply.status, reply.source, reply.error_message);
  if (reply.status == StatusCode::kOk) {
    w.U32(reply.data_offset);
    w.U32(reply.data_length);
    w.U32(static_cast<uint32_t>(reply.checksums.size()));
    for (uint64_t c : reply.checksums) w.U64(c);
  }
  std::string meta = w.Take();
  ByteWriter out;
  out.U32(static_cast<uint32_t>(meta.size()));
  return out.Take() + meta;
}

StatusOr<uint32_t> DecodePageReplyMetaLength(std::span<const char, kPageReplyPrefixSize> prefix,
                                             uint32_t payload_length) {
  uint32_t n = 0;
  std::memcpy(&n, prefix.data(), 4);
  if (n > kMaxPageReplyMeta || uint64_t{n} + kPageReplyPrefixSize > payload_length) {
    return CorruptionError("bad page reply metadata length " + std::to_string(n));
  }
  return n;
}

StatusOr<PageReplyMeta> DecodePageReplyMeta(std::span<const char> meta) {
  ByteReader r(meta);
  PageReplyMeta h;
  CAIRN_RETURN_IF_ERROR(GetOutcome(r, &h.status, &h.source, &h.error_message));
  if (h.status == StatusCode::kOk) {
    uint32_t n = 0;
    if (!r.U32(&h.data_offset) || !r.U32(&h.data_length) || !r.U32(&n)) {
      return CorruptionError("truncated page reply");
    }
    if (n > kMaxChecksums || n != ChunkCount(h.data_length) ||
        uint64_t{h.data_offset} + h.data_length > kMaxPageSize) {
      return CorruptionError("page reply range or checksum count is inconsistent");
    }
    h.checksums.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      if (!r.U64(&h.checksums[i])) return CorruptionError("truncated page reply checksums");
    }
  }
  if (r.remaining() != 0) return CorruptionError("trailing bytes in page reply metadata");
  return h;
}

StatusOr<PageReplyMeta> DecodePageReply(std::span<const char> payload,
                                        std::span<const char>* data) {
  if (payload.size() < kPageReplyPrefixSize || payload.size() > kMaxPayload) {
    return CorruptionError("page reply too short or too long");
  }
  CAIRN_ASSIGN_OR_RETURN(uint32_t meta_length,
                         DecodePageReplyMetaLength(payload.first<kPageReplyPrefixSize>(),
                                                   static_cast<uint32_t>(payload.size())));
  CAIRN_ASSIGN_OR_RETURN(PageReplyMeta meta,
                         DecodePageReplyMeta(payload.subspan(kPageReplyPrefixSize, meta_length)));
  *data = payload.subspan(kPageReplyPrefixSize + meta_length);
  if (data->size() != (meta.status == StatusCode::kOk ? meta.data_length : 0)) {
    return CorruptionError("page reply data length does not match its metadata");
  }
  return meta;
}

std::string EncodeControlReply(const ControlReply& reply) {
  ByteWriter w;
  PutOutcome(w, reply.status, reply.source, reply.error_message);
  return w.Take();
}

StatusOr<ControlReply> DecodeControlReply(std::span<const char> payload) {
  ByteReader r(payload);
  ControlReply c;
  CAIRN_RETURN_IF_ERROR(GetOutcome(r, &c.status, &c.source, &c.error_message));
  if (r.remaining() != 0) return CorruptionError("trailing bytes in control reply");
  return c;
}

MessageType TypeOf(const MetadataRequest& request) {
  if (std::holds_alternative<StatPathRequest>(request)) return MessageType::kStatPath;
  if (std::holds_alternative<ListDirRequest>(request)) return MessageType::kListDir;
  return MessageType::kListPending;
}

bool IsMetadataRequest(MessageType type) {
  return type == MessageType::kStatPath || type == MessageType::kListDir ||
         type == MessageType::kListPending;
}

const std::string& PathOf(const MetadataRequest& request) {
  return std::visit([](const auto& q) -> const std::string& { return q.path; }, request);
}

uint32_t& DeadlineOf(MetadataRequest& request) {
  return std::visit([](auto& q) -> uint32_t& { return q.deadline_ms; }, request);
}

std::string EncodeMetadataRequest(const MetadataRequest& request) {
  ByteWriter w;
  if (const auto* stat = std::get_if<StatPathRequest>(&request)) {
    w.U32(stat->deadline_ms);
    w.Str(stat->path);
  } else if (const auto* pending = std::get_if<ListPendingRequest>(&request)) {
    w.U32(pending->deadline_ms);
    w.Str(pending->path);
  } else {
    const auto& list = std::get<ListDirRequest>(request);
    w.U32(list.deadline_ms);
    w.Str(list.path);
    w.Str(list.token);
    w.U32(list.max_entries);
  }
  return w.Take();
}

namespace {

// The paths of metadata and write requests.
Status ValidateMetadataPath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() > kMaxMetadataPath ||
      path.find('\0') != std::string::npos) {
    return InvalidArgumentError("a request's path must be absolute, at most " +
                                std::to_string(kMaxMetadataPath) + " bytes, without NUL");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MetadataRequest> DecodeMetadataRequest(MessageType type, std::span<const char> payload) {
  ByteReader r(payload);
  MetadataRequest out;
  if (type == MessageType::kStatPath) {
    StatPathRequest q;
    if (!r.U32(&q.deadline_ms) || !r.Str(&q.path)) return CorruptionError("truncated StatPath");
    out = std::move(q);
  } else if (type == MessageType::kListDir) {
    ListDirRequest q;
    if (!r.U32(&q.deadline_ms) || !r.Str(&q.path) || !r.Str(&q.token) || !r.U32(&q.max_entries)) {
      return CorruptionError("truncated ListDir");
    }
    if (q.token.size() > kMaxListToken) return InvalidArgumentError("ListDir token too long");
    if (q.max_entries == 0 || q.max_entries > kMaxListEntries) {
      return InvalidArgumentError("ListDir max_entries must be 1.." +
                                  std::to_string(kMaxListEntries));
    }
    out = std::move(q);
  } else if (type == MessageType::kListPending) {
    ListPendingRequest q;
    if (!r.U32(&q.deadline_ms) || !r.Str(&q.path)) return CorruptionError("truncated ListPending");
    out = std::move(q);
  } else {
    return CorruptionError("message type " + std::to_string(static_cast<int>(type)) +
                           " is not a metadata request");
  }
  if (r.remaining() != 0) return CorruptionError("trailing bytes after a metadata request");
  CAIRN_RETURN_IF_ERROR(ValidateMetadataPath(PathOf(out)));
  return out;
}

std::string EncodeMetadataReply(const MetadataReply& reply) {
  ByteWriter w;
  w.U8(static_cast<uint8_t>(reply.status));
  if (reply.status != StatusCode::kOk) {
    w.Str(std::string_view(reply.error_message).substr(0, kMaxErrorMessage));
    return w.Take();
  }
  w.Str(reply.next_token);
  w.U32(static_cast<uint32_t>(reply.entries.size()));
  for (const DirEntry& e : reply.entries) {
    w.Str(e.name);
    w.U8(e.is_dir ? 1 : 0);
    w.U64(e.size);
    w.Str(e.version);
    w.U64(static_cast<uint64_t>(e.mtime_ns));
  }
  return w.Take();
}

StatusOr<MetadataReply> DecodeMetadataReply(std::span<const char> payload) {
  ByteReader r(payload);
  MetadataReply m;
  uint8_t status = 0;
  if (!r.U8(&status)) return CorruptionError("empty metadata reply");
  if (status > static_cast<uint8_t>(StatusCode::kInternal)) {
    return CorruptionError("metadata reply with an unknown status");
  }
  m.status = static_cast<StatusCode>(status);
  if (m.status != StatusCode::kOk) {
    if (!r.Str(&m.error_message)) return CorruptionError("truncated metadata error reply");
  } else {
    uint32_t count = 0;
    if (!r.Str(&m.next_token) || !r.U32(&count)) return CorruptionError("truncated metadata reply");
    if (count > kMaxListEntries) return CorruptionError("metadata reply with too many entries");
    m.entries.resize(count);
    for (DirEntry& e : m.entries) {
      uint8_t is_dir = 0;
      uint64_t mtime = 0;
      if (!r.Str(&e.name) || !r.U8(&is_dir) || !r.U64(&e.size) || !r.Str(&e.version) ||
          !r.U64(&mtime)) {
        return CorruptionError("truncated metadata reply entry");
      }
      if (is_dir > 1 || e.name.find('/') != std::string::npos ||
          e.name.find('\0') != std::string::npos || e.name == "." || e.name == "..") {
        return CorruptionError("metadata reply with a bad entry");
      }
      e.is_dir = is_dir == 1;
      e.mtime_ns = static_cast<int64_t>(mtime);
    }
  }
  if (r.remaining() != 0) return CorruptionError("trailing bytes in metadata reply");
  return m;
}

namespace {

// The write request types, in the order of WriteRequest's alternatives.
constexpr MessageType kWriteTypes[] = {
    MessageType::kOpenWrite,  MessageType::kWritePage,   MessageType::kTruncateWrite,
    MessageType::kSyncWrite,  MessageType::kCloseWrite,  MessageType::kAbortWrite,
    MessageType::kRemovePath, MessageType::kMakeDir,     MessageType::kRename,
    MessageType::kSyncPath,   MessageType::kReadWritten, MessageType::kHandOver,
    MessageType::kKeepWrite};

// OpenWrite flag bits.
constexpr uint8_t kOpenCreate = 1u << 0;
constexpr uint8_t kOpenExclusive = 1u << 1;
constexpr uint8_t kOpenTruncate = 1u << 2;
constexpr uint8_t kOpenSeenAbsent = 1u << 3;

template <typename T>
concept NamesHandle = requires(const T& q) {
  q.handle;
};
template <typename T>
concept HasDeadline = requires(const T& q) {
  q.deadline_ms;
};

struct WriteEncoder {
  ByteWriter& w;
  void operator()(const OpenWriteRequest& q) {
    w.U32(q.deadline_ms);
    w.Str(q.path);
    w.U8(static_cast<uint8_t>((q.create ? kOpenCreate : 0) | (q.exclusive ? kOpenExclusive : 0) |
                              (q.truncate ? kOpenTruncate : 0) |
                              (q.seen_absent ? kOpenSeenAbsent : 0)));
    w.U8(static_cast<uint8_t>(q.mode));
  }
  void operator()(const WritePageRequest& q) {
    w.U64(q.handle);
    w.U64(q.offset);
    w.U32(static_cast<uint32_t>(q.data.size()));
    w.U32(static_cast<uint32_t>(q.checksums.size()));
    for (uint64_t c : q.checksums) w.U64(c);
  }
  void operator()(const TruncateWriteRequest& q) {
    w.U32(q.deadline_ms);
    w.U64(q.handle);
    w.U64(q.size);
  }
  void operator()(const SyncWriteRequest& q) { PutHandle(q.deadline_ms, q.handle); }
  void operator()(const CloseWriteRequest& q) { PutHandle(q.deadline_ms, q.handle); }
  void operator()(const AbortWriteRequest& q) { PutHandle(q.deadline_ms, q.handle); }
  void operator()(const KeepWriteRequest& q) { PutHandle(q.deadline_ms, q.handle); }
  void operator()(const RemovePathRequest& q) {
    w.U32(q.deadline_ms);
    w.Str(q.path);
    w.U8(q.directory ? 1 : 0);
  }
  void operator()(const MakeDirRequest& q) {
    w.U32(q.deadline_ms);
    w.Str(q.path);
  }
  void operator()(const SyncPathRequest& q) {
    w.U32(q.deadline_ms);
    w.Str(q.path);
  }
  void operator()(const ReadWrittenRequest& q) {
    w.U32(q.deadline_ms);
    w.U64(q.handle);
    w.U64(q.offset);
    w.U32(q.length);
  }
  void operator()(const RenameRequest& q) { PutRename(q.deadline_ms, q.from, q.to, q.no_replace); }
  void operator()(const HandOverRequest& q) {
    PutRename(q.deadline_ms, q.from, q.to, q.no_replace);
  }
  void PutRename(uint32_t deadline_ms, const std::string& from, const std::string& to,
                 bool no_replace) {
    w.U32(deadline_ms);
    w.Str(from);
    w.Str(to);
    w.U8(no_replace ? 1 : 0);
  }
  void PutHandle(uint32_t deadline_ms, uint64_t handle) {
    w.U32(deadline_ms);
    w.U64(handle);
  }
};

// WritePage: the layout first (Corruption), then the values (InvalidArgument). The checksum
// count is checked against the data length, and both against the payload, before anything is
// allocated, so a peer's count cannot make us allocate more than it sent.
StatusOr<WriteRequest> DecodeWritePage(std::span<const char> payload) {
  ByteReader r(payload);
  WritePageRequest q;
  uint32_t length = 0, count = 0;
  if (!r.U64(&q.handle) || !r.U64(&q.offset) || !r.U32(&length) || !r.U32(&count)) {
    return CorruptionError("truncated WritePage request");
  }
  if (count != ChunkCount(length)) {
    return CorruptionError("WritePage checksum count does not match its data length");
  }
  if (r.remaining() != uint64_t{count} * sizeof(uint64_t) + length) {
    return CorruptionError("WritePage data length disagrees with its payload");
  }
  q.checksums.resize(count);
  for (uint64_t& c : q.checksums) {
    if (!r.U64(&c)) return CorruptionError("truncated WritePage checksums");
  }
  q.data = payload.subspan(r.position());
  if (length == 0 || length > kMaxWriteData) {
    return InvalidArgumentError("WritePage needs 1.." + std::to_string(kMaxWriteData) +
                                " bytes, not " + std::to_string(length));
  }
  if (q.handle == 0) return InvalidArgumentError("WritePage without a handle");
  // length <= kMaxWriteData < kMaxWriteOffset: the subtraction cannot wrap.
  if (q.offset > kMaxWriteOffset - length) {
    return InvalidArgumentError("WritePage past the largest file offset");
  }
  return WriteRequest(std::move(q));
}

// The checks of a write request that decoded whole (WritePage checks its own).
struct WriteValidator {
  Status operator()(const OpenWriteRequest& q) const {
    if (q.mode != WriteMode::kThrough && q.mode != WriteMode::kBack) {
      return InvalidArgumentError("unknown write mode " + std::to_string(static_cast<int>(q.mode)));
    }
    if (q.exclusive && !q.create) return InvalidArgumentError("exclusive open without create");
    return ValidateMetadataPath(q.path);
  }
  Status operator()(const WritePageRequest&) const { return Status::Ok(); }
  Status operator()(const TruncateWriteRequest& q) const {
    if (q.size > kMaxWriteOffset) return InvalidArgumentError("truncate past the largest size");
    return CheckHandle(q.handle);
  }
  Status operator()(const SyncWriteRequest& q) const { return CheckHandle(q.handle); }
  Status operator()(const CloseWriteRequest& q) const { return CheckHandle(q.handle); }
  Status operator()(const AbortWriteRequest& q) const { return CheckHandle(q.handle); }
  Status operator()(const KeepWriteRequest& q) const { return CheckHandle(q.handle); }
  Status operator()(const RemovePathRequest& q) const { return ValidateMetadataPath(q.path); }
  Status operator()(const MakeDirRequest& q) const { return ValidateMetadataPath(q.path); }
  Status operator()(const SyncPathRequest& q) const { return ValidateMetadataPath(q.path); }
  Status operator()(const RenameRequest& q) const {
    CAIRN_RETURN_IF_ERROR(ValidateMetadataPath(q.from));
    return ValidateMetadataPath(q.to);
  }
  Status operator()(const HandOverRequest& q) const {
    CAIRN_RETURN_IF_ERROR(ValidateMetadataPath(q.from));
    return ValidateMetadataPath(q.to);
  }
  Status operator()(const ReadWrittenRequest& q) const {
    if (q.length == 0 || q.length > kMaxReadWritten) {
      return InvalidArgumentError("ReadWritten needs 1.." + std::to_string(kMaxReadWritten) +
                                  " bytes, not " + std::to_string(q.length));
    }
    if (q.offset > kMaxWriteOffset)
      return InvalidArgumentError("ReadWritten past the largest size");
    return CheckHandle(q.handle);
  }
  static Status CheckHandle(uint64_t handle) {
    return handle == 0 ? InvalidArgumentError("a write request without a handle") : Status::Ok();
  }
};

}  // namespace

MessageType TypeOf(const WriteRequest& request) { return kWriteTypes[request.index()]; }

bool IsWriteRequest(MessageType type) {
  return std::find(std::begin(kWriteTypes), std::end(kWriteTypes), type) != std::end(kWriteTypes);
}

uint64_t HandleOf(const WriteRequest& request) {
  return std::visit(
      []<typename T>(const T& q) -> uint64_t {
        if constexpr (NamesHandle<T>) {
          return q.handle;
        } else {
          return 0;
        }
      },
      request);
}

uint32_t DeadlineOf(const WriteRequest& request) {
  return std::visit(
      []<typename T>(const T& q) -> uint32_t {
        if constexpr (HasDeadline<T>) {
          return q.deadline_ms;
        } else {
          return 0;
        }
      },
      request);
}

std::string EncodeWriteRequest(const WriteRequest& request) {
  ByteWriter w;
  std::visit(WriteEncoder{w}, request);
  return w.Take();
}

// Rename and HandOver share one layout (`u32 deadline_ms, str from, str to, u8 no_replace`):
// `ok` false when it is cut short; Corruption for a flag other than 0 or 1.
template <typename T>
Status ReadRenameLayout(ByteReader& r, std::string_view name, bool* ok, WriteRequest* out) {
  T q;
  uint8_t no_replace = 0;
  *ok = r.U32(&q.deadline_ms) && r.Str(&q.from) && r.Str(&q.to) && r.U8(&no_replace);
  if (*ok && no_replace > 1) {
    return CorruptionError(std::string(name) + " with a bad no_replace flag");
  }
  q.no_replace = no_replace == 1;
  *out = std::move(q);
  return Status::Ok();
}

StatusOr<WriteRequest> DecodeWriteRequest(MessageType type, std::span<const char> payload) {
  if (type == MessageType::kWritePage) return DecodeWritePage(payload);
  ByteReader r(payload);
  WriteRequest out;
  bool ok = false;
  switch (type) {
    case MessageType::kOpenWrite: {
      OpenWriteRequest q;
      uint8_t flags = 0, mode = 0;
      ok = r.U32(&q.deadline_ms) && r.Str(&q.path) && r.U8(&flags) && r.U8(&mode);
      if (ok && (flags & ~(kOpenCreate | kOpenExclusive | kOpenTruncate | kOpenSeenAbsent)) != 0) {
        return CorruptionError("unknown OpenWrite flags " + std::to_string(flags));
      }
      q.create = flags & kOpenCreate;
      q.exclusive = flags & kOpenExclusive;
      q.truncate = flags & kOpenTruncate;
      q.seen_absent = flags & kOpenSeenAbsent;
      q.mode = static_cast<WriteMode>(mode);
      out = std::move(q);
      break;
    }
    case MessageType::kTruncateWrite: {
      TruncateWriteRequest q;
      ok = r.U32(&q.deadline_ms) && r.U64(&q.handle) && r.U64(&q.size);
      out = q;
      break;
    }
    case MessageType::kSyncWrite: {
      SyncWriteRequest q;
      ok = r.U32(&q.deadline_ms) && r.U64(&q.handle);
      out = q;
      break;
    }
    case MessageType::kCloseWrite: {
      CloseWriteRequest q;
      ok = r.U32(&q.deadline_ms) && r.U64(&q.handle);
      out = q;
      break;
    }
    case MessageType::kAbortWrite: {
      AbortWriteRequest q;
      ok = r.U32(&q.deadline_ms) && r.U64(&q.handle);
      out = q;
      break;
    }
    case MessageType::kKeepWrite: {
      KeepWriteRequest q;
      ok = r.U32(&q.deadline_ms) && r.U64(&q.handle);
      out = q;
      break;
    }
    case MessageType::kRemovePath: {
      RemovePathRequest q;
      uint8_t directory = 0;
      ok = r.U32(&q.deadline_ms) && r.Str(&q.path) && r.U8(&directory);
      if (ok && directory > 1) return CorruptionError("RemovePath with a bad directory flag");
      q.directory = directory == 1;
      out = std::move(q);
      break;
    }
    case MessageType::kMakeDir: {
      MakeDirRequest q;
      ok = r.U32(&q.deadline_ms) && r.Str(&q.path);
      out = std::move(q);
      break;
    }
    case MessageType::kSyncPath: {
      SyncPathRequest q;
      ok = r.U32(&q.deadline_ms) && r.Str(&q.path);
      out = std::move(q);
      break;
    }
    case MessageType::kReadWritten: {
      ReadWrittenRequest q;
      ok = r.U32(&q.deadline_ms) && r.U64(&q.handle) && r.U64(&q.offset) && r.U32(&q.length);
      out = q;
      break;
    }
    case MessageType::kRename:
      CAIRN_RETURN_IF_ERROR(ReadRenameLayout<RenameRequest>(r, "Rename", &ok, &out));
      break;
    case MessageType::kHandOver:
      CAIRN_RETURN_IF_ERROR(ReadRenameLayout<HandOverRequest>(r, "HandOver", &ok, &out));
      break;
    default:
      return CorruptionError("message type " + std::to_string(static_cast<int>(type)) +
                             " is not a write request");
  }
  if (!ok) return CorruptionError("truncated write request");
  if (r.remaining() != 0) return CorruptionError("trailing bytes after a write request");
  CAIRN_RETURN_IF_ERROR(std::visit(WriteValidator{}, out));
  return out;
}

std::string EncodeWriteReply(const WriteReply& reply) {
  ByteWriter w;
  w.U8(static_cast<uint8_t>(reply.status));
  if (reply.status != StatusCode::kOk) {
    w.Str(std::string_view(reply.error_message).substr(0, kMaxErrorMessage));
    w.U16(reply.reason);
    return w.Take();
  }
  w.U64(reply.handle);
  w.U64(reply.size);
  w.Str(reply.version);
  w.U64(static_cast<uint64_t>(reply.mtime_ns));
  w.U32(reply.idle_timeout_ms);
  const std::span<const char> data(reply.data.data(),
                                   std::min<size_t>(reply.data.size(), kMaxReadWritten));
  w.U32(static_cast<uint32_t>(data.size()));
  for (uint64_t c : ChunkChecksums(data)) w.U64(c);
  w.Bytes(data);
  return w.Take();
}

StatusOr<WriteReply> DecodeWriteReply(std::span<const char> payload) {
  ByteReader r(payload);
  WriteReply w;
  uint8_t status = 0;
  if (!r.U8(&status)) return CorruptionError("empty write reply");
  if (status > static_cast<uint8_t>(StatusCode::kInternal)) {
    return CorruptionError("write reply with an unknown status");
  }
  w.status = static_cast<StatusCode>(status);
  if (w.status != StatusCode::kOk) {
    if (!r.Str(&w.error_message) || !r.U16(&w.reason)) {
      return CorruptionError("truncated write error reply");
    }
  } else {
    uint64_t mtime = 0;
    uint32_t length = 0;
    if (!r.U64(&w.handle) || !r.U64(&w.size) || !r.Str(&w.version) || !r.U64(&mtime) ||
        !r.U32(&w.idle_timeout_ms) || !r.U32(&length)) {
      return CorruptionError("truncated write reply");
    }
    w.mtime_ns = static_cast<int64_t>(mtime);
    if (length > kMaxReadWritten) return CorruptionError("write reply with too much data");
    const uint32_t count = ChunkCount(length);
    if (r.remaining() != uint64_t{count} * sizeof(uint64_t) + length) {
      return CorruptionError("write reply data length disagrees with its payload");
    }
    std::vector<uint64_t> checksums(count);
    for (uint64_t& c : checksums) {
      if (!r.U64(&c)) return CorruptionError("truncated write reply checksums");
    }
    if (!r.Bytes(&w.data, length)) return CorruptionError("truncated write reply data");
    if (ChunkChecksums(w.data) != checksums) {
      return CorruptionError("write reply data does not match its checksums");
    }
  }
  if (r.remaining() != 0) return CorruptionError("trailing bytes in write reply");
  return w;
}

WriteReply WriteErrorReply(const Status& error) {
  WriteReply reply;
  reply.status = error.code();
  reply.error_message = error.message();
  reply.reason = static_cast<uint16_t>(error.reason());
  return reply;
}

Status WriteReplyError(const WriteReply& reply) {
  Status error(reply.status, reply.error_message);
  switch (static_cast<StatusReason>(reply.reason)) {
    case StatusReason::kTooManyOpenFiles:
      return error.WithReason(StatusReason::kTooManyOpenFiles);
    case StatusReason::kNone:
      break;
  }
  return error;  // None, or one this build does not know.
}

std::string EncodeHelloReply(const HelloReply& reply) {
  ByteWriter w;
  w.U8(static_cast<uint8_t>(reply.status));
  w.Str(std::string_view(reply.error_message).substr(0, kMaxErrorMessage));
  w.Str(reply.principal);
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
  uint8_t status = 0;
  if (!r.U8(&status) || !r.Str(&h.error_message) || !r.Str(&h.principal) ||
      !r.U32(&h.protocol_version) || !r.U32(&h.page_size) || !r.Str(&h.worker_id) ||
      !r.Str(&h.instance_token) || !r.U16(&dirs)) {
    return CorruptionError("truncated Hello reply");
  }
  if (status > static_cast<uint8_t>(StatusCode::kInternal)) {
    return CorruptionError("Hello reply with an unknown status");
  }
  h.status = static_cast<StatusCode>(status);
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
