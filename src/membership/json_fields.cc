#include "membership/json_fields.h"

#include <limits>

namespace cairn::membership {
namespace {

Status WrongType(std::string_view where, const char* name, std::string_view expected) {
  std::string m(where);
  m += ": '";
  m += name;
  m += "' is not ";
  m += expected;
  return InvalidArgumentError(std::move(m));
}

}  // namespace

StatusOr<nlohmann::json> ParseJsonObject(std::string_view text, std::string_view where) {
  nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(std::string(where) + ": not valid JSON");
  if (!j.is_object()) return InvalidArgumentError(std::string(where) + ": not a JSON object");
  return j;
}

const nlohmann::json* JsonMember(const nlohmann::json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

std::optional<int64_t> JsonAsInt64(const nlohmann::json& value) {
  // is_number_integer() is true for both stored integer kinds; read each as itself, so no
  // conversion can leave the type's range.
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

std::optional<uint64_t> JsonAsUint64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < 0) return std::nullopt;
    return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

StatusOr<std::optional<bool>> JsonBool(const nlohmann::json& object, const char* name,
                                       std::string_view where) {
  const nlohmann::json* f = JsonMember(object, name);
  if (f == nullptr) return std::optional<bool>();
  if (!f->is_boolean()) return WrongType(where, name, "a bool");
  return std::optional<bool>(f->get<bool>());
}

StatusOr<std::optional<std::string>> JsonString(const nlohmann::json& object, const char* name,
                                                std::string_view where) {
  const nlohmann::json* f = JsonMember(object, name);
  if (f == nullptr) return std::optional<std::string>();
  if (!f->is_string()) return WrongType(where, name, "a string");
  return std::optional<std::string>(f->get_ref<const std::string&>());
}

StatusOr<std::optional<int64_t>> JsonInt64(const nlohmann::json& object, const char* name,
                                           std::string_view where) {
  const nlohmann::json* f = JsonMember(object, name);
  if (f == nullptr) return std::optional<int64_t>();
  std::optional<int64_t> v = JsonAsInt64(*f);
  if (!v) return WrongType(where, name, "an integer in int64 range");
  return v;
}

StatusOr<std::optional<uint64_t>> JsonUint64(const nlohmann::json& object, const char* name,
                                             std::string_view where) {
  const nlohmann::json* f = JsonMember(object, name);
  if (f == nullptr) return std::optional<uint64_t>();
  std::optional<uint64_t> v = JsonAsUint64(*f);
  if (!v) return WrongType(where, name, "a non-negative integer in uint64 range");
  return v;
}

}  // namespace cairn::membership
