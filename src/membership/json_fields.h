// Typed, exception-free access to JSON documents: the one place where membership code turns
// nlohmann::json values into C++ values. Everything decoded here comes from outside the process
// (etcd replies, documents anyone with etcd access may have written), so a wrong type or an
// out-of-range number is an error Status, never an nlohmann exception or an undefined cast
// (nlohmann's get<int64_t>() on 3.6e76 is undefined behaviour; on "x" it throws).
//
// Numbers: an integer field must be a JSON integer (no fraction, no exponent, no string) that fits
// the C++ type; a negative value is refused for unsigned fields.
// Thread-safety: pure functions.
#ifndef CAIRN_MEMBERSHIP_JSON_FIELDS_H_
#define CAIRN_MEMBERSHIP_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace cairn::membership {

// Parses `text` as one JSON object. InvalidArgument "<where>: not valid JSON" or "<where>: not a
// JSON object". Never throws.
StatusOr<nlohmann::json> ParseJsonObject(std::string_view text, std::string_view where);

// The member `name` of `object`; nullptr if absent or if `object` is not an object. A JSON null
// counts as present (and then has the wrong type for every reader below).
const nlohmann::json* JsonMember(const nlohmann::json& object, const char* name);

// Optional members: nullopt when absent; InvalidArgument "<where>: '<name>' is not a ..." when
// present with another type or out of the type's range.
StatusOr<std::optional<bool>> JsonBool(const nlohmann::json& object, const char* name,
                                       std::string_view where);
StatusOr<std::optional<std::string>> JsonString(const nlohmann::json& object, const char* name,
                                                std::string_view where);
StatusOr<std::optional<int64_t>> JsonInt64(const nlohmann::json& object, const char* name,
                                           std::string_view where);
StatusOr<std::optional<uint64_t>> JsonUint64(const nlohmann::json& object, const char* name,
                                             std::string_view where);

// A value's integer reading, for array elements and other values without a name; nullopt if it
// is not a JSON integer within range.
std::optional<int64_t> JsonAsInt64(const nlohmann::json& value);
std::optional<uint64_t> JsonAsUint64(const nlohmann::json& value);

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_JSON_FIELDS_H_
