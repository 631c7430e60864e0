// Pure helpers for etcd's v3 JSON gateway: base64 for keys/values, prefix range ends, int64 fields
// (the gateway writes them as strings), error replies to Status, and KeyValue/event decoding.
// Kept apart from the HTTP code so they are unit-tested without an etcd.
// Thread-safety: pure functions.
#ifndef CAIRN_MEMBERSHIP_ETCD_JSON_H_
#define CAIRN_MEMBERSHIP_ETCD_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>

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
// zero values). InvalidArgument if it is present but not an integer.
StatusOr<int64_t> Int64Field(const nlohmann::json& object, const char* name);

// Maps an error reply ({"error", "code", "message"}, code = gRPC code) or an HTTP status to a
// Status with `context`. gRPC 5 -> NotFound, 9 -> FailedPrecondition, 11 (compacted) ->
// FailedPrecondition, 3 -> InvalidArgument, 14/4/1 -> Unavailable, others -> Internal or
// Unavailable for 5xx without a body.
Status ErrorReplyToStatus(int http_status, std::string_view body, std::string_view context);

// Decodes one mvccpb.KeyValue object (base64 key/value, string revisions).
StatusOr<KeyValue> DecodeKeyValue(const nlohmann::json& kv);
// Decodes one mvccpb.Event ({"type": "DELETE"?, "kv": {...}}); type absent = PUT.
StatusOr<WatchEvent> DecodeEvent(const nlohmann::json& event);

}  // namespace cairn::membership::etcd

#endif  // CAIRN_MEMBERSHIP_ETCD_JSON_H_
