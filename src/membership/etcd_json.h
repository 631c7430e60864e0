// Pure helpers for etcd's v3 JSON gateway: base64 for keys/values, prefix range ends, int64 fields
// (the gateway writes them as strings), error replies to Status, decoding of every reply the
// client reads, and bounded buffering of reply bodies and watch-stream lines. Kept apart from the
// HTTP code so they are unit-tested (and fuzzed) without an etcd.
//
// Every decoder treats its input as untrusted: a reply of an unexpected shape (a field of the
// wrong type, a non-object where an object belongs, a revision out of range) is InvalidArgument,
// never an nlohmann exception (which would terminate the process) or undefined behaviour.
// Callers turn these errors into Internal ("a reply that makes no sense", coordination.h).
// Thread-safety: pure functions; a LineSplitter is used by one thread.
#ifndef CAIRN_MEMBERSHIP_ETCD_JSON_H_
#define CAIRN_MEMBERSHIP_ETCD_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "membership/coordination.h"

namespace cairn::membership::etcd {

// Standard base64 with padding (what protobuf's JSON mapping uses for bytes).
std::string Base64Encode(std::string_view bytes);
// InvalidArgument on characters outside the alphabet or a bad length.
StatusOr<std::string> Base64Decode(std::string_view text);

// The etcd range_end that selects every key starting with `prefix`: the prefix with its last
// non-0xff byte incremented and the rest dropped; "\0" (all keys) for an empty or all-0xff prefix.
std::string PrefixRangeEnd(std::string_view prefix);

// Reads an int64 field written as a JSON string or number; absent or null = 0 (proto3 omits
// zero values). InvalidArgument if `object` is not an object or the field is present but not an
// integer in int64 range (a float such as 1e300 is not an integer).
StatusOr<int64_t> Int64Field(const nlohmann::json& object, const char* name);

// Maps an error reply ({"error", "code", "message"}, code = gRPC code) or an HTTP status to a
// Status with `context`. gRPC 5 -> NotFound, 9 -> FailedPrecondition, 11 (compacted) ->
// FailedPrecondition, 3 -> InvalidArgument, 14/4/1 -> Unavailable, others -> Internal or
// Unavailable for 5xx without a body.
Status ErrorReplyToStatus(int http_status, std::string_view body, std::string_view context);

// Parses a whole reply body; InvalidArgument if it is not one JSON object. Never throws.
StatusOr<nlohmann::json> ParseReply(std::string_view body);

// The store revision in a reply's "header" (0 if absent). InvalidArgument if the header is not an
// object or the revision is negative or INT64_MAX (callers compute revision + 1).
StatusOr<int64_t> HeaderRevision(const nlohmann::json& reply);

// Decodes one mvccpb.KeyValue object (base64 key/value, string revisions). InvalidArgument for a
// non-object, a key or value that is not a base64 string, or a revision out of range.
StatusOr<KeyValue> DecodeKeyValue(const nlohmann::json& kv);
// Decodes one mvccpb.Event ({"type": "DELETE"?, "kv": {...}}); type absent = PUT.
StatusOr<WatchEvent> DecodeEvent(const nlohmann::json& event);

// A RangeResponse: the kvs (absent = none; otherwise an array of KeyValues) and the header
// revision.
StatusOr<RangeResult> DecodeRangeReply(const nlohmann::json& reply);

// A TxnResponse's "succeeded" (absent = false, as proto3 omits it); InvalidArgument if present
// and not a bool.
StatusOr<bool> DecodeTxnSucceeded(const nlohmann::json& reply);

// One line of a /v3/watch stream: {"result": WatchResponse} or {"error": ...} (a bare
// WatchResponse is accepted too).
struct WatchMessage {
  std::optional<std::string> error;  // Set for {"error": ...}: the stream failed (as JSON text).
  bool created = false;
  bool canceled = false;
  int64_t header_revision = 0;
  int64_t compact_revision = 0;
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};
// InvalidArgument if the line is not a JSON object, "result" is not an object, or any field has
// an unexpected type ("created": "x", "events": {}, a malformed event...).
StatusOr<WatchMessage> DecodeWatchMessage(std::string_view line);

// Appends `data` to `body` if the result stays within `limit` bytes; false (body unchanged)
// otherwise. Bounds what one reply may make this process buffer.
bool AppendWithinLimit(std::string* body, std::string_view data, size_t limit);

// Splits a streamed body into '\n'-terminated lines, refusing any line longer than `max_line`
// bytes, so a peer that never sends a newline cannot make this process buffer without bound.
// Work is linear in the bytes received however a line is cut into chunks, and the buffer holds at
// most one line plus one chunk when the caller takes every complete line after each Append.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line) : max_line_(max_line) {}

  // Adds received bytes. ResourceExhausted if a line (complete or not) is longer than max_line;
  // the complete lines before it can still be taken with NextLine, then the splitter must be
  // Clear()ed before further use.
  Status Append(std::string_view data);
  // Removes and returns the next complete line, without its '\n'; nullopt if none is complete.
  std::optional<std::string> NextLine();
  // Drops everything buffered (a new stream starts).
  void Clear();

 private:
  const size_t max_line_;
  std::string buffer_;
  size_t next_ = 0;        // Start of the first line not yet returned by NextLine.
  size_t unfinished_ = 0;  // Start of the unfinished last line (after the last '\n').
};

}  // namespace cairn::membership::etcd

#endif  // CAIRN_MEMBERSHIP_ETCD_JSON_H_
