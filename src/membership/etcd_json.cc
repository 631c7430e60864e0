#include "membership/etcd_json.h"

#include <openssl/evp.h>

#include <charconv>
#include <cstring>
#include <limits>

#include "membership/json_fields.h"

namespace cairn::membership::etcd {

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return InvalidArgumentError("base64: length not a multiple of 4");
  if (text.empty()) return std::string();
  std::string out(text.size() / 4 * 3, '\0');
  // EVP_DecodeBlock does not reject every bad character position, but does reject characters
  // outside the alphabet (returns -1); padding is counted by hand since it returns whole blocks.
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return InvalidArgumentError("base64: invalid characters");
  size_t pad = 0;
  if (text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string PrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

StatusOr<int64_t> Int64Field(const nlohmann::json& object, const char* name) {
  if (!object.is_object()) return InvalidArgumentError("expected a JSON object");
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return int64_t{0};
  if (std::optional<int64_t> v = JsonAsInt64(*it)) return *v;
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && ptr == s.data() + s.size() && !s.empty()) return v;
  }
  return InvalidArgumentError(std::string("field '") + name + "' is not an int64");
}

Status ErrorReplyToStatus(int http_status, std::string_view body, std::string_view context) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  int code = -1;
  std::string message = std::string(body.substr(0, 300));
  if (j.is_object()) {
    // Read without get<int>(): a code beyond int's range must not be narrowed into a known one;
    // any integer that is not a gRPC code (0..16) is an unknown one, hence Internal.
    if (const nlohmann::json* c = JsonMember(j, "code")) {
      if (std::optional<int64_t> v = JsonAsInt64(*c)) {
        code = *v >= 0 && *v <= 16 ? static_cast<int>(*v) : std::numeric_limits<int>::max();
      }
    }
    if (const nlohmann::json* m = JsonMember(j, "message"); m != nullptr && m->is_string()) {
      message = m->get<std::string>();
    }
  }
  std::string text =
      std::string(context) + ": " + message + " (HTTP " + std::to_string(http_status) + ")";
  switch (code) {
    case 3:
      return InvalidArgumentError(std::move(text));
    case 5:
      return NotFoundError(std::move(text));
    case 9:
    case 11:
      return FailedPreconditionError(std::move(text));
    case 1:
    case 4:
    case 14:
      return UnavailableError(std::move(text));
    case -1:
      break;
    default:
      return InternalError(std::move(text));
  }
  if (http_status >= 500 || http_status == 0) return UnavailableError(std::move(text));
  return InternalError(std::move(text));
}

StatusOr<nlohmann::json> ParseReply(std::string_view body) {
  return ParseJsonObject(body, "etcd reply");
}

namespace {

// Revisions feed `revision + 1` (the next watch start), so INT64_MAX is refused with negatives.
StatusOr<int64_t> RevisionField(const nlohmann::json& object, const char* name) {
  CAIRN_ASSIGN_OR_RETURN(int64_t v, Int64Field(object, name));
  if (v < 0 || v == std::numeric_limits<int64_t>::max()) {
    return InvalidArgumentError(std::string("field '") + name + "' is out of range");
  }
  return v;
}

// A base64 bytes field: absent = empty (proto3 omits empty bytes); present = a base64 string.
StatusOr<std::string> BytesField(const nlohmann::json& object, const char* name) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> text, JsonString(object, name, "kv"));
  if (!text) return std::string();
  return Base64Decode(*text);
}

}  // namespace

StatusOr<int64_t> HeaderRevision(const nlohmann::json& reply) {
  const nlohmann::json* header = JsonMember(reply, "header");
  if (header == nullptr) return int64_t{0};
  if (!header->is_object()) return InvalidArgumentError("'header' is not an object");
  return RevisionField(*header, "revision");
}

StatusOr<KeyValue> DecodeKeyValue(const nlohmann::json& kv) {
  if (!kv.is_object()) return InvalidArgumentError("kv is not an object");
  KeyValue out;
  CAIRN_ASSIGN_OR_RETURN(out.key, BytesField(kv, "key"));
  CAIRN_ASSIGN_OR_RETURN(out.value, BytesField(kv, "value"));
  CAIRN_ASSIGN_OR_RETURN(out.create_revision, RevisionField(kv, "create_revision"));
  CAIRN_ASSIGN_OR_RETURN(out.mod_revision, RevisionField(kv, "mod_revision"));
  CAIRN_ASSIGN_OR_RETURN(out.lease_id, Int64Field(kv, "lease"));
  return out;
}

StatusOr<WatchEvent> DecodeEvent(const nlohmann::json& event) {
  const nlohmann::json* kv = JsonMember(event, "kv");
  if (kv == nullptr) return InvalidArgumentError("bad watch event");
  WatchEvent out;
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> type, JsonString(event, "type", "event"));
  if (type && *type == "DELETE") out.type = EventType::kDelete;
  CAIRN_ASSIGN_OR_RETURN(KeyValue decoded, DecodeKeyValue(*kv));
  out.key = std::move(decoded.key);
  out.value = std::move(decoded.value);
  out.mod_revision = decoded.mod_revision;
  return out;
}

StatusOr<RangeResult> DecodeRangeReply(const nlohmann::json& reply) {
  RangeResult result;
  CAIRN_ASSIGN_OR_RETURN(result.revision, HeaderRevision(reply));
  const nlohmann::json* kvs = JsonMember(reply, "kvs");
  if (kvs == nullptr) return result;
  if (!kvs->is_array()) return InvalidArgumentError("'kvs' is not an array");
  result.entries.reserve(kvs->size());
  for (const nlohmann::json& item : *kvs) {
    CAIRN_ASSIGN_OR_RETURN(KeyValue kv, DecodeKeyValue(item));
    result.entries.push_back(std::move(kv));
  }
  return result;
}

StatusOr<bool> DecodeTxnSucceeded(const nlohmann::json& reply) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> ok, JsonBool(reply, "succeeded", "txn reply"));
  return ok.value_or(false);
}

StatusOr<WatchMessage> DecodeWatchMessage(std::string_view line) {
  CAIRN_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(line, "watch reply"));
  WatchMessage out;
  if (const nlohmann::json* error = JsonMember(j, "error")) {
    out.error = error->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return out;
  }
  const nlohmann::json* result = JsonMember(j, "result");
  if (result == nullptr) result = &j;
  if (!result->is_object()) return InvalidArgumentError("watch reply: 'result' is not an object");
  const nlohmann::json& r = *result;
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> created, JsonBool(r, "created", "watch reply"));
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> canceled, JsonBool(r, "canceled", "watch reply"));
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> reason,
                         JsonString(r, "cancel_reason", "watch reply"));
  out.created = created.value_or(false);
  out.canceled = canceled.value_or(false);
  out.cancel_reason = reason.value_or(std::string());
  CAIRN_ASSIGN_OR_RETURN(out.header_revision, HeaderRevision(r));
  StatusOr<int64_t> compact = Int64Field(r, "compact_revision");
  if (!compact.ok()) return compact.status().WithContext("watch reply");
  out.compact_revision = *compact;
  const nlohmann::json* events = JsonMember(r, "events");
  if (events == nullptr) return out;
  if (!events->is_array()) return InvalidArgumentError("watch reply: 'events' is not an array");
  out.events.reserve(events->size());
  for (const nlohmann::json& e : *events) {
    StatusOr<WatchEvent> event = DecodeEvent(e);
    if (!event.ok()) return event.status().WithContext("watch reply");
    out.events.push_back(std::move(event).value());
  }
  return out;
}

bool AppendWithinLimit(std::string* body, std::string_view data, size_t limit) {
  if (data.size() > limit || body->size() > limit - data.size()) return false;
  body->append(data);
  return true;
}

Status LineSplitter::Append(std::string_view data) {
  // Returned lines are dropped here rather than in NextLine, so a long unfinished line moves at
  // most once per completed line, not once per chunk.
  if (next_ > 0) {
    buffer_.erase(0, next_);
    unfinished_ -= next_;
    next_ = 0;
  }
  const size_t scan_from = buffer_.size();
  buffer_.append(data);
  auto too_long = [&] {
    return ResourceExhaustedError("line longer than " + std::to_string(max_line_) + " bytes");
  };
  for (size_t pos = scan_from; pos < buffer_.size();) {
    const void* hit = std::memchr(buffer_.data() + pos, '\n', buffer_.size() - pos);
    if (hit == nullptr) break;
    const size_t newline = static_cast<size_t>(static_cast<const char*>(hit) - buffer_.data());
    if (newline - unfinished_ > max_line_) return too_long();
    unfinished_ = newline + 1;
    pos = newline + 1;
  }
  if (buffer_.size() - unfinished_ > max_line_) return too_long();
  return Status::Ok();
}

std::optional<std::string> LineSplitter::NextLine() {
  if (next_ >= unfinished_) return std::nullopt;
  // Every '\n' before unfinished_ ends a line, so the search cannot fail.
  const size_t newline = buffer_.find('\n', next_);
  std::string line = buffer_.substr(next_, newline - next_);
  next_ = newline + 1;
  return line;
}

void LineSplitter::Clear() {
  buffer_.clear();
  next_ = 0;
  unfinished_ = 0;
}

}  // namespace cairn::membership::etcd
