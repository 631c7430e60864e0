#include "config/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/units.h"

namespace cairn::config {
namespace {

using nlohmann::json;

Status FieldError(std::string_view field, std::string_view why) {
  return InvalidArgumentError("config field '" + std::string(field) + "': " + std::string(why));
}

// A JSON array of non-empty strings, appended to `out`.
Status GetStrings(const json& v, std::string_view field, std::vector<std::string>* out) {
  if (!v.is_array()) return FieldError(field, "must be an array of non-empty strings");
  for (const auto& item : v) {
    if (!item.is_string() || item.get<std::string>().empty()) {
      return FieldError(field, "must be an array of non-empty strings");
    }
    out->push_back(item.get<std::string>());
  }
  return Status::Ok();
}

StatusOr<std::string> GetString(const json& obj, const char* field, std::string_view where) {
  const json& v = obj.at(field);
  if (!v.is_string()) return FieldError(std::string(where) + field, "must be a string");
  return v.get<std::string>();
}

StatusOr<uint64_t> GetBytes(const json& v, std::string_view field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (!v.is_string()) return FieldError(field, "must be a size like \"10GiB\"");
  auto b = ParseBytes(v.get<std::string>());
  if (!b.ok()) return FieldError(field, b.status().message());
  return *b;
}

StatusOr<std::chrono::microseconds> GetDuration(const json& v, std::string_view field) {
  if (!v.is_string()) return FieldError(field, "must be a duration like \"30s\"");
  auto d = ParseDuration(v.get<std::string>());
  if (!d.ok()) return FieldError(field, d.status().message());
  return *d;
}

StatusOr<MountSpec> ParseMount(const json& m, size_t index) {
  std::string where = "mounts[" + std::to_string(index) + "].";
  if (!m.is_object()) return FieldError(where, "must be an object");
  MountSpec spec;
  for (const auto& [k, v] : m.items()) {
    if (k == "path") {
      CAIRN_ASSIGN_OR_RETURN(spec.path, GetString(m, "path", where));
    } else if (k == "uri") {
      CAIRN_ASSIGN_OR_RETURN(spec.uri, GetString(m, "uri", where));
    } else if (k == "metadata_ttl") {
      CAIRN_ASSIGN_OR_RETURN(spec.metadata_ttl, GetDuration(v, where + k));
    } else if (k == "write_mode") {
      CAIRN_ASSIGN_OR_RETURN(std::string mode, GetString(m, "write_mode", where));
      Status applied = ApplyWriteMode(mode, &spec);
      if (!applied.ok()) return FieldError(where + k, applied.message());
    } else if (k == "options") {
      if (!v.is_object()) return FieldError(where + k, "must be an object of strings");
      for (const auto& [ok, ov] : v.items()) {
        if (!ov.is_string()) return FieldError(where + k + "." + ok, "must be a string");
        spec.options[ok] = ov.get<std::string>();
      }
    } else {
      return FieldError(where + k, "unknown field");
    }
  }
  if (spec.path.empty() || spec.uri.empty()) return FieldError(where, "needs path and uri");
  return spec;
}

// `name` is "tls" (the page protocol: a CA is required) or "etcd_tls" (the system's CAs by
// default).
Status ParseTls(const json& t, const std::string& name, TlsSettings* out) {
  if (!t.is_object()) return FieldError(name, "must be an object");
  const std::string where = name + ".";
  for (const auto& [k, v] : t.items()) {
    if (k == "ca_file") {
      CAIRN_ASSIGN_OR_RETURN(out->ca_file, GetString(t, "ca_file", where));
    } else if (k == "cert_file") {
      CAIRN_ASSIGN_OR_RETURN(out->cert_file, GetString(t, "cert_file", where));
    } else if (k == "key_file") {
      CAIRN_ASSIGN_OR_RETURN(out->key_file, GetString(t, "key_file", where));
    } else {
      return FieldError(where + k, "unknown field");
    }
  }
  if (name == "tls" && out->ca_file.empty()) return FieldError("tls.ca_file", "is required");
  if (out->cert_file.empty() != out->key_file.empty()) {
    return FieldError(name, "cert_file and key_file go together");
  }
  return Status::Ok();
}

Status ParseWorker(const json& w, WorkerConfig* out) {
  if (!w.is_object()) return FieldError("worker", "must be an object");
  for (const auto& [k, v] : w.items()) {
    if (k == "id") {
      CAIRN_ASSIGN_OR_RETURN(out->id, GetString(w, "id", "worker."));
    } else if (k == "listen") {
      CAIRN_ASSIGN_OR_RETURN(out->listen, GetString(w, "listen", "worker."));
    } else if (k == "metrics_listen") {
      CAIRN_ASSIGN_OR_RETURN(out->metrics_listen, GetString(w, "metrics_listen", "worker."));
    } else if (k == "eviction_policy") {
      CAIRN_ASSIGN_OR_RETURN(out->eviction_policy, GetString(w, "eviction_policy", "worker."));
    } else if (k == "insecure_plaintext") {
      CAIRN_ASSIGN_OR_RETURN(out->insecure_plaintext,
                             GetString(w, "insecure_plaintext", "worker."));
    } else if (k == "metrics_insecure_plaintext") {
      CAIRN_ASSIGN_OR_RETURN(out->metrics_insecure_plaintext,
                             GetString(w, "metrics_insecure_plaintext", "worker."));
    } else if (k == "metrics_allow_anonymous") {
      if (!v.is_boolean())
        return FieldError("worker.metrics_allow_anonymous", "must be true or false");
      out->metrics_allow_anonymous = v.get<bool>();
    } else if (k == "token_public_keys") {
      CAIRN_RETURN_IF_ERROR(GetStrings(v, "worker.token_public_keys", &out->token_public_keys));
    } else if (k == "allowed_sources") {
      CAIRN_RETURN_IF_ERROR(GetStrings(v, "worker.allowed_sources", &out->allowed_sources));
    } else if (k == "allowed_endpoints") {
      CAIRN_RETURN_IF_ERROR(GetStrings(v, "worker.allowed_endpoints", &out->allowed_endpoints));
    } else if (k == "cache_dirs") {
      if (!v.is_array()) return FieldError("worker.cache_dirs", "must be an array");
      for (size_t i = 0; i < v.size(); ++i) {
        std::string where = "worker.cache_dirs[" + std::to_string(i) + "].";
        if (!v[i].is_object() || !v[i].contains("path") || !v[i].contains("capacity")) {
          return FieldError(where, "needs path and capacity");
        }
        CacheDir dir;
        CAIRN_ASSIGN_OR_RETURN(dir.path, GetString(v[i], "path", where));
        CAIRN_ASSIGN_OR_RETURN(dir.capacity_bytes, GetBytes(v[i]["capacity"], where + "capacity"));
        out->cache_dirs.push_back(std::move(dir));
      }
    } else {
      return FieldError("worker." + k, "unknown field");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Config> ParseConfig(std::string_view text) {
  json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgumentError("config is not valid JSON");
  if (!root.is_object()) return InvalidArgumentError("config must be a JSON object");
  Config config;
  for (const auto& [k, v] : root.items()) {
    if (k == "page_size") {
      CAIRN_ASSIGN_OR_RETURN(uint64_t ps, GetBytes(v, k));
      if (ps == 0 || ps > (16u << 20) || ps % (64 * 1024) != 0) {
        return FieldError(k, "must be a multiple of 64KiB up to 16MiB");
      }
      config.client.page_size = static_cast<uint32_t>(ps);
    } else if (k == "mounts") {
      if (!v.is_array()) return FieldError(k, "must be an array");
      for (size_t i = 0; i < v.size(); ++i) {
        CAIRN_ASSIGN_OR_RETURN(MountSpec spec, ParseMount(v[i], i));
        config.client.mounts.push_back(std::move(spec));
      }
    } else if (k == "workers") {
      if (!v.is_array()) return FieldError(k, "must be an array of \"host:port\"");
      for (const json& w : v) {
        if (!w.is_string()) return FieldError(k, "must be an array of \"host:port\"");
        config.client.workers.push_back(w.get<std::string>());
      }
    } else if (k == "worker_timeout") {
      CAIRN_ASSIGN_OR_RETURN(auto d, GetDuration(v, k));
      config.client.worker_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(d);
    } else if (k == "write_room_wait") {
      CAIRN_ASSIGN_OR_RETURN(auto d, GetDuration(v, k));
      if (d > std::chrono::hours(24)) return FieldError(k, "must be at most 24h");
      config.client.write_room_wait = std::chrono::duration_cast<std::chrono::milliseconds>(d);
    } else if (k == "etcd") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return FieldError(k, "must be a string of comma-separated etcd URLs");
      }
      config.client.etcd_endpoints = v.get<std::string>();
    } else if (k == "tls") {
      CAIRN_RETURN_IF_ERROR(ParseTls(v, k, &config.client.tls));
    } else if (k == "etcd_tls") {
      CAIRN_RETURN_IF_ERROR(ParseTls(v, k, &config.client.etcd_tls));
    } else if (k == "etcd_insecure_plaintext") {
      CAIRN_ASSIGN_OR_RETURN(config.client.etcd_insecure_plaintext,
                             GetString(root, "etcd_insecure_plaintext", ""));
    } else if (k == "metadata_via_workers") {
      if (!v.is_boolean()) return FieldError(k, "must be true or false");
      config.client.metadata_via_workers = v.get<bool>();
    } else if (k == "worker") {
      CAIRN_RETURN_IF_ERROR(ParseWorker(v, &config.worker));
    } else {
      return FieldError(k, "unknown field");
    }
  }
  return config;
}

StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto config = ParseConfig(ss.str());
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

StatusOr<MountSpec> ParseMountFlag(std::string_view flag) {
  size_t eq = flag.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == flag.size()) {
    return InvalidArgumentError("--mount needs PATH=URI, e.g. /lake=s3://bucket/prefix");
  }
  MountSpec spec;
  spec.path = std::string(flag.substr(0, eq));
  spec.uri = std::string(flag.substr(eq + 1));
  return spec;
}

Status ApplyWriteMode(std::string_view mode, MountSpec* spec) {
  if (mode == "read-only") {
    spec->read_only = true;
    spec->write_back = false;
  } else if (mode == "through") {
    spec->read_only = false;
    spec->write_back = false;
  } else if (mode == "back") {
    spec->read_only = false;
    spec->write_back = true;
  } else {
    return InvalidArgumentError("write mode must be read-only, through or back, not '" +
                                std::string(mode) + "'");
  }
  return Status::Ok();
}

std::string_view WriteModeName(const MountSpec& spec) {
  if (spec.read_only) return "read-only";
  return spec.write_back ? "back" : "through";
}

StatusOr<CacheDir> ParseCacheDirFlag(std::string_view flag, uint64_t default_capacity) {
  CacheDir dir;
  size_t colon = flag.rfind(':');
  if (colon == std::string_view::npos) {
    dir.path = std::string(flag);
    dir.capacity_bytes = default_capacity;
  } else {
    dir.path = std::string(flag.substr(0, colon));
    auto b = ParseBytes(flag.substr(colon + 1));
    if (!b.ok()) return b.status().WithContext("--cache-dir " + std::string(flag));
    dir.capacity_bytes = *b;
  }
  if (dir.path.empty()) return InvalidArgumentError("--cache-dir needs a folder");
  if (dir.capacity_bytes == 0) {
    return InvalidArgumentError("cache size for " + dir.path + " must be greater than 0");
  }
  return dir;
}

}  // namespace cairn::config
