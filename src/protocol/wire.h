// Cairn worker protocol (kVersion below): framing and one typed message per operation (pure code,
// no I/O). Only this module knows the byte layout; docs/protocol.md specifies it (keep the two
// in step).
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
#include <variant>
#include <vector>

#include "common/status.h"

namespace cairn::protocol {

inline constexpr uint32_t kMagic = 0x4E524143;  // "CARN" in little-endian byte order.
// The frame header's layout (magic, version, type, ...) is the same in every version, so any
// version can read another's header and answer a mismatch with kVersionMismatch.
// v3 (authorization): Hello carries the client's token; HelloReply the principal the worker
// established, or why it refused the connection. v4: metadata requests (StatPath, ListDir),
// answered by the worker from the source and filtered by the caller's grants. v5: writes (files
// written through the worker that owns the path, docs/write-path.md). v6: checksums cover 4 KiB
// chunks (kChecksumChunkSize), not 64 KiB: a v5 peer would check the wrong chunks, so it is
// refused. v7: MakeDir and Rename, and RemovePath of directories (a v6 worker would not know
// the types). v8: SyncPath (waits for the write-back uploads under a path). v9: ReadWritten
// (reads of a file open for writing), and write replies carry data. v10: OpenWrite's SEEN_ABSENT
// flag (a v9 worker would refuse the bit). v11: ListPending (worker to worker: the children of a
// directory that hold a worker's write-back files not yet uploaded). v12: HandOver (a rename of
// a write-back file not yet uploaded, sent to the owner of its old name, which passes the file
// to the owner of the new one). v13: KeepWrite (keeps a write handle alive while its file stays
// open without writes), and write replies carry the worker's idle timeout for handles. Older
// peers get a kVersionMismatch naming both.
inline constexpr uint8_t kVersion = 14;
inline constexpr uint8_t kMinVersion = 14;  // Oldest version this build still speaks.
inline constexpr size_t kFrameHeaderSize = 24;
// Largest payload accepted (a page of at most 16 MiB plus metadata); bigger frames are rejected.
inline constexpr uint32_t kMaxPayload = (16u << 20) + (64u << 10);
inline constexpr uint32_t kMaxPageSize = 16u << 20;

enum class MessageType : uint8_t {
  kHello = 1,  // client -> worker: the versions the client speaks (HelloRequest).
  kHelloReply = 2,
  kReadPage = 3,  // -> kPageReply with data.
  kPageReply = 4,
  kPing = 5,
  kPong = 6,
  kLookupPage = 7,     // -> kPageReply: data if cached, else no data ("not here").
  kPeerRead = 8,       // worker -> worker: a cached page for a fill -> kPageReply.
  kLoadPage = 9,       // -> kControlReply.
  kCopyFromPeer = 10,  // -> kControlReply.
  kProbePage = 11,     // -> kControlReply.
  kDropPage = 12,      // -> kControlReply.
  kControlReply = 13,
  kVersionMismatch = 14,  // The sender cannot speak the version of a frame it received.
  kWritePage = 15,        // -> kWriteReply (v5).
  kStatPath = 16,         // -> kMetadataReply with one entry (v4).
  kListDir = 17,          // -> kMetadataReply with a page of entries (v4).
  kMetadataReply = 18,    // (v4)
  kOpenWrite = 19,        // -> kWriteReply with a handle (v5).
  kWriteReply = 20,       // (v5)
  kTruncateWrite = 21,    // -> kWriteReply (v5).
  kSyncWrite = 22,        // -> kWriteReply (v5).
  kCloseWrite = 23,       // -> kWriteReply (v5).
  kAbortWrite = 24,       // -> kWriteReply (v5).
  kRemovePath = 25,       // -> kWriteReply (v5; directories v7).
  kMakeDir = 26,          // -> kWriteReply (v7).
  kRename = 27,           // -> kWriteReply with the object under its new name (v7).
  kSyncPath = 28,         // -> kWriteReply once the path's write-back files are uploaded (v8).
  kReadWritten = 29,      // -> kWriteReply with the bytes of a file open for writing (v9).
  kListPending = 30,      // worker -> worker: -> kMetadataReply (v11).
  kHandOver = 31,         // -> kWriteReply: a rename of a file not yet uploaded (v12).
  kKeepWrite = 32,        // -> kWriteReply: keeps a write handle alive (v13).
};

struct FrameHeader {
  MessageType type = MessageType::kPing;
  uint16_t flags = 0;  // Reserved; 0.
  uint64_t request_id = 0;
  uint32_t payload_length = 0;
};

// Writes the 24-byte header into `out` (must hold kFrameHeaderSize bytes).
void EncodeFrameHeader(const FrameHeader& header, char* out);
// Parses and validates a header. Corruption on bad magic, header checksum, unknown type or an
// oversized payload; FailedPrecondition ("protocol version mismatch ...") when the magic is ours
// but the version is not one this build speaks. Either way the connection must be closed (after
// a kVersionMismatch reply for the second).
StatusOr<FrameHeader> DecodeFrameHeader(std::span<const char, kFrameHeaderSize> bytes);
// The version byte of a header (for messages about a mismatch).
uint8_t FrameVersion(std::span<const char, kFrameHeaderSize> bytes);

// kHello payload: the range of versions the client speaks, and its credential.
inline constexpr size_t kMaxHelloToken = 4096;
struct HelloRequest {
  uint32_t min_version = kMinVersion;
  uint32_t max_version = kVersion;
  // A signed token (auth/token.h) naming the principal the client acts as; empty = the
  // identity of the connection (its TLS client certificate, or anonymous). At most
  // kMaxHelloToken bytes (Corruption beyond).
  std::string token;
};
std::string EncodeHelloRequest(const HelloRequest& hello);
StatusOr<HelloRequest> DecodeHelloRequest(std::span<const char> payload);

// kVersionMismatch payload: what the sender speaks, and a sentence for the log.
struct VersionMismatch {
  uint32_t min_version = kMinVersion;
  uint32_t max_version = kVersion;
  std::string message;
};
std::string EncodeVersionMismatch(const VersionMismatch& mismatch);
StatusOr<VersionMismatch> DecodeVersionMismatch(std::span<const char> payload);

// The page a request is about. Validated on decode: the page size is a multiple of 64 KiB up to
// kMaxPageSize and the page lies inside the object (no arithmetic before that check).
struct PageRef {
  std::string mount;    // Namespace mount path ("/bucket_a").
  std::string key;      // Object key relative to the mount root.
  std::string version;  // Object version the client pinned at open.
  uint64_t object_size = 0;
  uint64_t page_index = 0;
  uint32_t page_size = 0;  // The client's page size; must equal the worker's.
};

// The version a worker gives a file of a write-back mount that is closed but not yet in its
// source (docs/write-path.md, decision 7): "cairn-pending-<epoch>-<id>", both lowercase hex.
// Only the worker holding the file (the path's owner) serves pages of such a version (from its
// spool); <epoch> is random per start of that worker's write-back queue, so a reader holding a
// version from before a restart is told the file changed rather than served another file.
inline constexpr std::string_view kPendingVersionPrefix = "cairn-pending-";
std::string PendingVersion(uint64_t epoch, uint64_t id);
bool IsPendingVersion(std::string_view version);
struct PendingVersionParts {
  uint64_t epoch = 0;
  uint64_t id = 0;
};
// InvalidArgument unless `version` is exactly a PendingVersion.
StatusOr<PendingVersionParts> ParsePendingVersion(std::string_view version);

// Fields every request has.
struct RequestBase {
  uint32_t deadline_ms = 0;  // Relative deadline; 0 = none. The worker drops late work.
  PageRef page;
};

// Bytes of a page: the 4 KiB checksum chunks holding [offset, offset + length). From the cache,
// else from the source (then cached, unless no_cache).
struct ReadPageRequest : RequestBase {
  uint32_t offset = 0;
  uint32_t length = 0;
  bool refetch = false;   // The client found the cached copy corrupt: drop it, read the source.
  bool no_cache = false;  // Serve without storing (one-pass scans).
};
// As ReadPage, but only from the cache: a reply without data means "not cached here". Clients
// look for a page on the other replicas with it before paying for the source.
struct LookupPageRequest : RequestBase {
  uint32_t offset = 0;
  uint32_t length = 0;
};
// A worker filling its copy from this one: the whole page if cached (or fetched a moment ago and
// still being written), else no data. Counted as a page sent to a peer, not a cache hit.
struct PeerReadRequest : RequestBase {};
// Make sure the page is cached (preload); waits until it is on disk.
struct LoadPageRequest : RequestBase {};
// As LoadPage, but a missing page is first copied from the worker `peer` (a replica that has
// just cached it), and read from the source only if that fails: R replicas, one source read.
struct CopyFromPeerRequest : RequestBase {
  std::string peer;  // A worker id (non-empty), resolved by the receiver's own membership view.
};
// Whether the page is cached.
struct ProbePageRequest : RequestBase {};
// Drop the cached copy (cairn free).
struct DropPageRequest : RequestBase {};

using Request = std::variant<ReadPageRequest, LookupPageRequest, PeerReadRequest, LoadPageRequest,
                             CopyFromPeerRequest, ProbePageRequest, DropPageRequest>;

MessageType TypeOf(const Request& request);
const RequestBase& BaseOf(const Request& request);
RequestBase& BaseOf(Request& request);
// True for the requests answered by kPageReply with data (ReadPage, LookupPage, PeerRead); the
// others are answered by kControlReply.
bool WantsData(MessageType request_type);
inline bool WantsData(const Request& request) { return WantsData(TypeOf(request)); }

// The payload of `request` (its type is TypeOf(request)).
std::string EncodeRequest(const Request& request);
// Decodes and validates the payload of a request of `type`. Corruption for a truncated payload,
// trailing bytes or a type that is not a request (the connection must close); InvalidArgument
// for a well-formed request that makes no sense (bad page size, range outside the page, ...):
// answered with an error reply.
StatusOr<Request> DecodeRequest(MessageType type, std::span<const char> payload);

// Where a page came from. kPeer: it was not cached here and was copied from a peer worker.
enum class PageSource : uint8_t { kCache = 0, kUnderStorage = 1, kPeer = 2 };

// kPageReply payload: u32 meta_length, the metadata (below), then data_length data bytes. The
// length prefix lets a reader take the metadata whole and hand it to DecodePageReplyMeta
// without knowing its layout.
inline constexpr size_t kPageReplyPrefixSize = 4;
inline constexpr uint32_t kMaxPageReplyMeta = 70000;
struct PageReplyMeta {
  StatusCode status = StatusCode::kOk;
  PageSource source = PageSource::kCache;
  std::string error_message;        // Only when status != kOk.
  uint32_t data_offset = 0;         // Offset within the page of the first data byte.
  uint32_t data_length = 0;         // 0 with status OK: no data (a lookup that missed).
  std::vector<uint64_t> checksums;  // One per 4 KiB chunk of the returned data.
};
// The prefix and metadata of a kPageReply (the data bytes follow them on the wire).
std::string EncodePageReplyMeta(const PageReplyMeta& reply);
// The metadata length from the first kPageReplyPrefixSize bytes of a payload; Corruption if it
// is larger than kMaxPageReplyMeta or than the payload.
StatusOr<uint32_t> DecodePageReplyMetaLength(std::span<const char, kPageReplyPrefixSize> prefix,
                                             uint32_t payload_length);
// Decodes the metadata (the bytes after the prefix). Corruption if malformed.
StatusOr<PageReplyMeta> DecodePageReplyMeta(std::span<const char> meta);

// Decodes a whole kPageReply payload held in memory (tools and tests; the client streams the
// data into place instead): the metadata, and `*data` set to the data bytes. Corruption if
// malformed or if the data length disagrees with the metadata.
StatusOr<PageReplyMeta> DecodePageReply(std::span<const char> payload, std::span<const char>* data);

// kControlReply payload: the outcome, and whether the page WAS cached when the request arrived
// (kCache), was not (kUnderStorage), or (CopyFromPeer) was copied from the peer (kPeer).
struct ControlReply {
  StatusCode status = StatusCode::kOk;
  PageSource source = PageSource::kCache;
  std::string error_message;  // Only when status != kOk.
};
std::string EncodeControlReply(const ControlReply& reply);
StatusOr<ControlReply> DecodeControlReply(std::span<const char> payload);

// Metadata requests (v4): what a namespace path is, and one page of a directory, answered by
// the worker from the mount's source with the worker's credentials, so a job needs no source
// credentials of its own; under an authorization policy the worker shows only what the
// caller's grants allow (auth::Visibility). Paths are namespace paths ("/<mount>/<key>"),
// validated on decode: absolute, at most kMaxMetadataPath bytes, no NUL; the worker also
// refuses paths that are not normalised.
inline constexpr size_t kMaxMetadataPath = 4096;
inline constexpr size_t kMaxListToken = 4096;
inline constexpr uint32_t kMaxListEntries = 1000;
struct StatPathRequest {
  uint32_t deadline_ms = 0;  // As RequestBase::deadline_ms.
  std::string path;
};
struct ListDirRequest {
  uint32_t deadline_ms = 0;
  std::string path;   // The directory.
  std::string token;  // From the previous reply's next_token; empty for the first page.
  uint32_t max_entries = kMaxListEntries;  // 1..kMaxListEntries source entries per page.
};
// Worker to worker (v11): the children of directory `path` that hold the answering worker's
// write-back files not yet uploaded (docs/write-path.md, decision 7): a file directly in it as
// a file entry (its pending size, version and close time), a folder below it that holds some
// as a directory entry; at most kMaxListEntries, sorted by name, no next_token. The directory's
// owner asks every other worker, so that its listing shows files pending at their own paths'
// owners. Only cluster nodes may ask (under a policy); not forwarded further.
struct ListPendingRequest {
  uint32_t deadline_ms = 0;
  std::string path;  // The directory.
};
using MetadataRequest = std::variant<StatPathRequest, ListDirRequest, ListPendingRequest>;

MessageType TypeOf(const MetadataRequest& request);
bool IsMetadataRequest(MessageType type);
const std::string& PathOf(const MetadataRequest& request);
uint32_t& DeadlineOf(MetadataRequest& request);
std::string EncodeMetadataRequest(const MetadataRequest& request);
// As DecodeRequest: Corruption for a malformed payload, InvalidArgument for a well-formed
// request that makes no sense (a relative path, max_entries 0 or above kMaxListEntries).
StatusOr<MetadataRequest> DecodeMetadataRequest(MessageType type, std::span<const char> payload);

// One entry of a directory, or the stat of a path (then `name` is its last component, "" for
// the root).
struct DirEntry {
  std::string name;
  bool is_dir = false;
  uint64_t size = 0;
  std::string version;
  int64_t mtime_ns = 0;
  bool operator==(const DirEntry&) const = default;
};
// kMetadataReply payload. A StatPath reply that is OK has exactly one entry; a ListDir reply
// at most kMaxListEntries (names non-empty, without '/' or NUL) and possibly none (a page whose
// entries the caller may not see) while next_token says more follow.
struct MetadataReply {
  StatusCode status = StatusCode::kOk;
  std::string error_message;  // Only when status != kOk.
  std::vector<DirEntry> entries;
  std::string next_token;
};
std::string EncodeMetadataReply(const MetadataReply& reply);
// Corruption if malformed (also for an entry name with '/' or NUL, too many entries).
StatusOr<MetadataReply> DecodeMetadataReply(std::span<const char> payload);

// Write requests (v5; docs/write-path.md). A file is written through one worker (the path's
// owner): OpenWrite makes a write handle, WritePage puts bytes at any offset, TruncateWrite
// sets the size, SyncWrite and CloseWrite make what was written durable in the source
// (write-through: the object is committed), AbortWrite discards it. A handle is a random
// number the worker chose, usable by the principal that opened it on any connection; it is
// gone after CloseWrite, AbortWrite, or the worker's idle timeout. Paths as for metadata
// requests (validated on decode the same way).
inline constexpr uint32_t kMaxWriteData = 4u << 20;      // Bytes of one WritePage.
inline constexpr uint64_t kMaxWriteOffset = 1ull << 50;  // Offset + length of a write (1 PiB).
// What the client expects; the worker applies its mount's write mode (MountSpec::write_back),
// which clients learn from the same mount table.
enum class WriteMode : uint8_t {
  kThrough = 0,  // Close and sync return once the object is in the source.
  kBack = 1,     // Close returns once the data is in the worker's journal.
};
struct OpenWriteRequest {
  uint32_t deadline_ms = 0;
  std::string path;
  bool create = false;     // Create the file if it does not exist (else NotFound).
  bool exclusive = false;  // With create: AlreadyExists if it exists (O_EXCL).
  bool truncate = false;   // Start empty (else from the current content).
  WriteMode mode = WriteMode::kThrough;
  // With create + truncate and without exclusive: the client's own lookup of `path` found nothing
  // a moment ago, so the worker takes that as the object's state at open instead of asking the
  // source again (one request fewer per new file). The commit is then conditional on the name
  // being absent: a wrong claim can only make the commit fail, never overwrite an object.
  bool seen_absent = false;
};
// Bytes at `offset` of an open file, with one checksum (common/checksum.h) per 4 KiB chunk of
// `data`, checked by the worker before anything is written. `data` points into the decoded
// payload (or the caller's buffer when encoding); 1..kMaxWriteData bytes.
struct WritePageRequest {
  uint64_t handle = 0;
  uint64_t offset = 0;
  std::vector<uint64_t> checksums;
  std::span<const char> data;
};
struct TruncateWriteRequest {
  uint32_t deadline_ms = 0;
  uint64_t handle = 0;
  uint64_t size = 0;  // At most kMaxWriteOffset.
};
struct SyncWriteRequest {
  uint32_t deadline_ms = 0;
  uint64_t handle = 0;
};
struct CloseWriteRequest {
  uint32_t deadline_ms = 0;
  uint64_t handle = 0;
};
struct AbortWriteRequest {
  uint32_t deadline_ms = 0;
  uint64_t handle = 0;
};
// Counts as a request on the handle and does nothing else (v13): a file held open without
// writes for longer than the worker's idle timeout (a log or metrics file an application
// appends to now and then) keeps its handle. NotFound when the handle is gone.
struct KeepWriteRequest {
  uint32_t deadline_ms = 0;
  uint64_t handle = 0;
};
// Removes a file (directory = false) or an empty directory (directory = true).
struct RemovePathRequest {
  uint32_t deadline_ms = 0;
  std::string path;
  bool directory = false;
};
// Creates an empty directory (v7).
struct MakeDirRequest {
  uint32_t deadline_ms = 0;
  std::string path;
};
// Moves the file `from` (a directory too where the source can: folders) to `to`, in one mount
// (v7). no_replace: AlreadyExists when `to` exists (renameat2's RENAME_NOREPLACE).
struct RenameRequest {
  uint32_t deadline_ms = 0;
  std::string from;
  std::string to;
  bool no_replace = false;
};
// A rename of a write-back file, sent to the worker that owns `from` (v12). That worker holds
// the closed files of `from` not yet uploaded (docs/write-path.md, decision 8); it writes the
// newest to the worker that owns `to` (OpenWrite, WritePage, CloseWrite under `to`: the file
// waits there for its upload as if written under `to`), then drops its files of `from`. The
// reply is that close's. NotFound means the worker holds no such file of `from` now (it had
// none, or it could not pass the file on and uploaded it instead): the client then sends the
// Rename to the owner of `to`, which renames in the source.
struct HandOverRequest {
  uint32_t deadline_ms = 0;
  std::string from;
  std::string to;
  bool no_replace = false;
};
// Waits until every closed file of a write-back mount under `path` (a file or a folder; "/" for
// all) that this worker holds is in its source (v8; `cairn sync`). DeadlineExceeded when the
// deadline passes first; OK at once on a worker with nothing pending.
struct SyncPathRequest {
  uint32_t deadline_ms = 0;
  std::string path;
};
// Reads bytes of a file open for writing, as written so far through any of its handles' writes
// that the worker has answered (v9): what `git index-pack`, zip and HDF5 writers read back
// before the file is closed. 1..kMaxReadWritten bytes; the reply's data is shorter at the end of
// the file (empty past it). Needs the read grant on the file's path.
inline constexpr uint32_t kMaxReadWritten = 1u << 20;
struct ReadWrittenRequest {
  uint32_t deadline_ms = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;  // At most kMaxWriteOffset.
  uint32_t length = 0;
};
using WriteRequest = std::variant<OpenWriteRequest, WritePageRequest, TruncateWriteRequest,
                                  SyncWriteRequest, CloseWriteRequest, AbortWriteRequest,
                                  RemovePathRequest, MakeDirRequest, RenameRequest, SyncPathRequest,
                                  ReadWrittenRequest, HandOverRequest, KeepWriteRequest>;

MessageType TypeOf(const WriteRequest& request);
bool IsWriteRequest(MessageType type);
// The handle a request names (0 for OpenWrite, RemovePath, MakeDir, Rename and SyncPath).
uint64_t HandleOf(const WriteRequest& request);
// The deadline (WritePage has none: 0).
uint32_t DeadlineOf(const WriteRequest& request);
// The payload of a write request. For WritePage the data is not included: the payload is the
// returned bytes followed by request.data (send both; no copy of the data).
std::string EncodeWriteRequest(const WriteRequest& request);
// As DecodeRequest: Corruption for a malformed payload (a checksum count that does not match
// the data, trailing bytes), InvalidArgument for a well-formed request that makes no sense (a
// relative path, handle 0, an empty write or one past kMaxWriteOffset, exclusive without
// create, an unknown mode). A WritePage's data points into `payload`.
StatusOr<WriteRequest> DecodeWriteRequest(MessageType type, std::span<const char> payload);

// kWriteReply payload. OK replies carry what the request produced: OpenWrite the handle and the
// file's size; WritePage, TruncateWrite the size; SyncWrite, CloseWrite the size, version and
// mtime of the object now in the source; Rename those of the object under its new name (size 0
// and an empty version for a directory); AbortWrite, KeepWrite, RemovePath, MakeDir nothing;
// ReadWritten the file's size and the bytes read, with one checksum per 4 KiB chunk of them
// (checked by DecodeWriteReply: Corruption when they differ).
struct WriteReply {
  StatusCode status = StatusCode::kOk;
  std::string error_message;  // Only when status != kOk.
  uint16_t reason = 0;        // Only when status != kOk (v14): a cairn::StatusReason.
  uint64_t handle = 0;
  uint64_t size = 0;
  std::string version;
  int64_t mtime_ns = 0;
  // OpenWrite (v13): how long the worker keeps the handle without a request (the client sends
  // KeepWrite well within it while the file stays open); 0 in other replies.
  uint32_t idle_timeout_ms = 0;
  std::string data;  // ReadWritten only; at most kMaxReadWritten bytes.
};
// Largest kWriteReply payload a client accepts.
inline constexpr uint32_t kMaxWriteReplyPayload =
    kMaxReadWritten + (kMaxReadWritten / 4096) * 8 + 70000;
std::string EncodeWriteReply(const WriteReply& reply);
StatusOr<WriteReply> DecodeWriteReply(std::span<const char> payload);
// The error reply for `error` (not OK), and the error a reply that is not OK stands for (a
// reason this build does not know reads as none).
WriteReply WriteErrorReply(const Status& error);
Status WriteReplyError(const WriteReply& reply);

struct HelloReply {
  // Not OK: the worker refused the client (a bad token: PermissionDenied) and closes the
  // connection after this reply; the fields below are then empty.
  StatusCode status = StatusCode::kOk;
  std::string error_message;
  // The principal the worker will authorize this connection's requests as ("" = anonymous).
  std::string principal;
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
inline uint32_t PageLengthOf(const PageRef& page) {
  return PageLength(page.object_size, page.page_index, page.page_size);
}

}  // namespace cairn::protocol

#endif  // CAIRN_PROTOCOL_WIRE_H_
