#include "membership/etcd_json.h"

#include <openssl/evp.h>

#include <charconv>

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
  if (it->is_number_integer()) return it->get<int64_t>();
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
    if (j.contains("code") && j["code"].is_number_integer()) code = j["code"].get<int>();
    if (j.contains("message") && j["message"].is_string()) message = j["message"];
  }
  std::string text =
      std::string(context) + ": " + message + " (HTTP " + std::to_string(http_status) + ")";
  switch (code) {
    case 3: return InvalidArgumentError(std::move(text));
    case 5: return NotFoundError(std::move(text));
    case 9:
    case 11: return FailedPreconditionError(std::move(text));
    case 1:
    case 4:
    case 14: return UnavailableError(std::move(text));
    case -1: break;
    default: return InternalError(std::move(text));
  }
  if (http_status >= 500 || http_status == 0) return UnavailableError(std::move(text));
  return InternalError(std::move(text));
}

StatusOr<KeyValue> DecodeKeyValue(const nlohmann::json& kv) {
  if (!kv.is_object()) return InvalidArgumentError("kv is not an object");
  KeyValue out;
  auto str = [&](const char* name) -> std::string {
    auto it = kv.find(name);
    return it != kv.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  CAIRN_ASSIGN_OR_RETURN(out.key, Base64Decode(str("key")));
  CAIRN_ASSIGN_OR_RETURN(out.value, Base64Decode(str("value")));
  CAIRN_ASSIGN_OR_RETURN(out.create_revision, Int64Field(kv, "create_revision"));
  CAIRN_ASSIGN_OR_RETURN(out.mod_revision, Int64Field(kv, "mod_revision"));
  CAIRN_ASSIGN_OR_RETURN(out.lease_id, Int64Field(kv, "lease"));
  return out;
}

StatusOr<WatchEvent> DecodeEvent(const nlohmann::json& event) {
  if (!event.is_object() || !event.contains("kv")) return InvalidArgumentError("bad watch event");
  WatchEvent out;
  auto type = event.find("type");
  if (type != event.end() && type->is_string() && *type == "DELETE") out.type = EventType::kDelete;
  CAIRN_ASSIGN_OR_RETURN(KeyValue kv, DecodeKeyValue(event["kv"]));
  out.key = std::move(kv.key);
  out.value = std::move(kv.value);
  out.mod_revision = kv.mod_revision;
  return out;
}

}  // namespace cairn::membership::etcd
