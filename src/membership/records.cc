#include "membership/records.h"

#include <cctype>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/logging.h"
#include "membership/json_fields.h"

namespace cairn::membership {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxWorkerIdLength = 128;
// Largest metadata_ttl_ms whose conversion to microseconds cannot overflow int64.
constexpr int64_t kMaxTtlMs = std::numeric_limits<int64_t>::max() / 1000;

bool IsWorkerIdChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

std::string Dump(const json& j) {
  // replace: never throws; validation before encoding makes replacement impossible in practice.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Field readers over membership/json_fields.h: an absent optional field yields its default; a
// missing required field or a present field of the wrong type is InvalidArgument naming `where`.
StatusOr<std::string> StringField(const json& obj, const char* name, bool required,
                                  const std::string& where) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<std::string> v, JsonString(obj, name, where));
  if (!v && required) return InvalidArgumentError(where + ": missing field '" + name + "'");
  return v ? std::move(*v) : std::string();
}

StatusOr<int64_t> Int64Field(const json& obj, const char* name, int64_t fallback,
                             const std::string& where) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<int64_t> v, JsonInt64(obj, name, where));
  return v.value_or(fallback);
}

StatusOr<MountSpec> DecodeMount(const json& m, const std::string& where) {
  if (!m.is_object()) return InvalidArgumentError(where + ": not a JSON object");
  MountSpec spec;
  CAIRN_ASSIGN_OR_RETURN(spec.path, StringField(m, "path", true, where));
  CAIRN_ASSIGN_OR_RETURN(spec.uri, StringField(m, "uri", true, where));
  if (const json* opts = JsonMember(m, "options"); opts != nullptr) {
    if (!opts->is_object()) return InvalidArgumentError(where + ": 'options' is not an object");
    for (const auto& [name, value] : opts->items()) {
      if (!value.is_string()) {
        return InvalidArgumentError(where + ": option '" + name + "' is not a string");
      }
      spec.options[name] = value.get<std::string>();
    }
  }
  const int64_t default_ttl_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(MountSpec{}.metadata_ttl).count();
  CAIRN_ASSIGN_OR_RETURN(int64_t ttl_ms, Int64Field(m, "metadata_ttl_ms", default_ttl_ms, where));
  if (ttl_ms < 0 || ttl_ms > kMaxTtlMs) {
    return InvalidArgumentError(where + ": 'metadata_ttl_ms' is out of range");
  }
  spec.metadata_ttl = std::chrono::milliseconds(ttl_ms);
  CAIRN_ASSIGN_OR_RETURN(int64_t replicas, Int64Field(m, "replicas", 1, where));
  if (replicas < std::numeric_limits<int>::min() || replicas > std::numeric_limits<int>::max()) {
    return InvalidArgumentError(where + ": 'replicas' is out of range");
  }
  spec.replicas = static_cast<int>(replicas);
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> read_only, JsonBool(m, "read_only", where));
  if (read_only) spec.read_only = *read_only;
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> write_back, JsonBool(m, "write_back", where));
  if (write_back) spec.write_back = *write_back;
  if (spec.read_only && spec.write_back) {
    return InvalidArgumentError(where + ": a read-only mount cannot be 'write_back'");
  }
  return spec;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  // nlohmann's strict serializer throws on invalid UTF-8: an exact check, and the exception
  // stays inside this function.
  try {
    (void)json(std::string(s)).dump();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

Status ValidateWorkerId(std::string_view id) {
  if (id.empty() || id.size() > kMaxWorkerIdLength) {
    return InvalidArgumentError("worker id must be 1 to 128 characters, got " +
                                std::to_string(id.size()));
  }
  for (char c : id) {
    if (!IsWorkerIdChar(c)) {
      return InvalidArgumentError("worker id '" + std::string(id) +
                                  "' may only contain A-Z a-z 0-9 . _ : -");
    }
  }
  return Status::Ok();
}

Status ValidateHostPort(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size() ||
      address.size() > 300) {
    return InvalidArgumentError("'" + Printable(address) + "' is not host:port");
  }
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);
  bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  for (char c : host) {
    const bool ok =
        bracketed
            ? (std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')
            : (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_');
    if (!ok) {
      return InvalidArgumentError("'" + Printable(address) +
                                  "' is not host:port (a host name, an IPv4 address or [IPv6])");
    }
  }
  uint32_t value = 0;
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || port.size() > 5) {
      return InvalidArgumentError("'" + Printable(address) + "' has a bad port");
    }
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value == 0 || value > 65535) {
    return InvalidArgumentError("'" + Printable(address) + "' has a bad port");
  }
  return Status::Ok();
}

Status ValidateWorkerRecord(const WorkerRecord& record) {
  CAIRN_RETURN_IF_ERROR(ValidateWorkerId(record.id));
  if (record.address.empty()) {
    return InvalidArgumentError("worker " + record.id + " has no address");
  }
  // Clients dial `address` and the CLI fetches `metrics_address`: anything but host:port (a
  // URL with a path, credentials, a scheme) is refused, whoever wrote it into etcd.
  Status address = ValidateHostPort(record.address);
  if (!address.ok()) return address.WithContext("worker " + record.id + " address");
  if (!record.metrics_address.empty()) {
    Status metrics = ValidateHostPort(record.metrics_address);
    if (!metrics.ok()) return metrics.WithContext("worker " + record.id + " metrics_address");
  }
  return Status::Ok();
}

std::string WorkerKey(std::string_view id) {
  std::string key(kWorkersPrefix);
  key += id;
  return key;
}

std::string EncodeWorkerRecord(const WorkerRecord& record) {
  json j = {{"id", record.id},
            {"address", record.address},
            {"metrics_address", record.metrics_address},
            {"metrics_tls", record.metrics_tls},
            {"capacity_bytes", record.capacity_bytes},
            {"start_time_unix_ms", record.start_time_unix_ms}};
  return Dump(j);
}

StatusOr<WorkerRecord> DecodeWorkerRecord(std::string_view text) {
  const std::string where = "worker record";
  CAIRN_ASSIGN_OR_RETURN(json j, ParseJsonObject(text, where));
  WorkerRecord r;
  CAIRN_ASSIGN_OR_RETURN(r.id, StringField(j, "id", true, where));
  Status id_ok = ValidateWorkerId(r.id);
  if (!id_ok.ok()) return id_ok.WithContext(where);
  CAIRN_ASSIGN_OR_RETURN(r.address, StringField(j, "address", true, where));
  CAIRN_ASSIGN_OR_RETURN(r.metrics_address, StringField(j, "metrics_address", false, where));
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> metrics_tls, JsonBool(j, "metrics_tls", where));
  r.metrics_tls = metrics_tls.value_or(false);
  CAIRN_ASSIGN_OR_RETURN(std::optional<uint64_t> capacity, JsonUint64(j, "capacity_bytes", where));
  if (capacity) r.capacity_bytes = *capacity;
  CAIRN_ASSIGN_OR_RETURN(r.start_time_unix_ms, Int64Field(j, "start_time_unix_ms", 0, where));
  Status valid = ValidateWorkerRecord(r);
  if (!valid.ok()) return valid.WithContext(where);
  return r;
}

std::string EncodeMountTable(const std::vector<MountSpec>& mounts) {
  json list = json::array();
  for (const MountSpec& m : mounts) {
    json options = json::object();
    for (const auto& [name, value] : m.options) options[name] = value;
    list.push_back({{"path", m.path},
                    {"uri", m.uri},
                    {"options", std::move(options)},
                    {"metadata_ttl_ms",
                     std::chrono::duration_cast<std::chrono::milliseconds>(m.metadata_ttl).count()},
                    {"replicas", m.replicas},
                    {"read_only", m.read_only},
                    {"write_back", m.write_back}});
  }
  return Dump(json{{"version", kMountTableVersion}, {"mounts", std::move(list)}});
}

StatusOr<std::vector<MountSpec>> DecodeMountTable(std::string_view text) {
  CAIRN_ASSIGN_OR_RETURN(json j, ParseJsonObject(text, "mount table"));
  CAIRN_ASSIGN_OR_RETURN(int64_t version, Int64Field(j, "version", -1, "mount table"));
  if (version != kMountTableVersion) {
    return InvalidArgumentError("mount table: unsupported version " + std::to_string(version) +
                                " (this build reads version 1)");
  }
  const json* list = JsonMember(j, "mounts");
  if (list == nullptr || !list->is_array()) {
    return InvalidArgumentError("mount table: 'mounts' is missing or not an array");
  }
  std::vector<MountSpec> mounts;
  mounts.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(
        MountSpec spec, DecodeMount((*list)[i], "mount table: mounts[" + std::to_string(i) + "]"));
    mounts.push_back(std::move(spec));
  }
  return mounts;
}

}  // namespace cairn::membership
