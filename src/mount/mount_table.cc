#include "mount/mount_table.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "common/units.h"
#include "common/uri.h"

namespace cairn::mount {
namespace {

bool IsUnder(std::string_view path, std::string_view dir) {
  if (dir == "/") return true;
  return path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/';
}

Status ParseIntOption(const std::string& name, const std::string& value, int* out) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || ptr != value.data() + value.size() || v < 0) {
    return InvalidArgumentError("option " + name + " needs a non-negative integer, got '" + value +
                                "'");
  }
  *out = v;
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> NormalizePath(std::string_view path) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgumentError("path '" + std::string(path) + "' must be absolute");
  }
  if (path.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("path contains a NUL byte");
  }
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "." || part == "..") {
      return InvalidArgumentError("path '" + std::string(path) + "' contains '.' or '..'");
    }
    if (!part.empty()) {
      out += '/';
      out += part;
    }
    i = j;
  }
  return out.empty() ? std::string("/") : out;
}

StatusOr<ufs::UfsOptions> UfsOptionsFromSpec(const MountSpec& spec) {
  ufs::UfsOptions o;
  for (const auto& [name, value] : spec.options) {
    if (name == "endpoint")
      o.endpoint = value;
    else if (name == "region")
      o.region = value;
    else if (name == "access_key")
      o.access_key = value;
    else if (name == "secret_key")
      o.secret_key = value;
    else if (name == "session_token")
      o.session_token = value;
    else if (name == "profile")
      o.profile = value;
    else if (name == "path_style") {
      if (value != "true" && value != "false") {
        return InvalidArgumentError("option path_style must be true or false");
      }
      o.path_style = value == "true";
    } else if (name == "max_retries") {
      CAIRN_RETURN_IF_ERROR(ParseIntOption(name, value, &o.max_retries));
    } else if (name == "connect_timeout_ms") {
      CAIRN_RETURN_IF_ERROR(ParseIntOption(name, value, &o.connect_timeout_ms));
    } else if (name == "request_timeout_ms") {
      CAIRN_RETURN_IF_ERROR(ParseIntOption(name, value, &o.request_timeout_ms));
    } else if (name == "max_concurrency") {
      CAIRN_RETURN_IF_ERROR(ParseIntOption(name, value, &o.max_concurrency));
      if (o.max_concurrency < 0) return InvalidArgumentError("option max_concurrency must be >= 0");
    } else if (name == "max_bandwidth") {
      auto bytes = ParseBytes(value);
      if (!bytes.ok()) {
        return InvalidArgumentError("option max_bandwidth must be bytes per second, e.g. 500MiB");
      }
      o.max_bytes_per_second = *bytes;
    } else {
      return InvalidArgumentError("unknown mount option '" + name + "' on " + spec.path);
    }
  }
  return o;
}

StatusOr<std::shared_ptr<const MountTable>> MountTable::Create(
    std::vector<MountSpec> specs, std::vector<std::shared_ptr<ufs::UfsLimiter>> shared_limiters,
    const StoreDecorator& decorate) {
  std::vector<std::shared_ptr<ufs::UnderStorage>> stores;
  for (const MountSpec& spec : specs) {
    CAIRN_ASSIGN_OR_RETURN(ufs::UfsOptions options, UfsOptionsFromSpec(spec));
    options.shared_limiters = shared_limiters;
    auto store = ufs::OpenUnderStorage(spec.uri, options);
    if (!store.ok()) return store.status().WithContext("mount " + spec.path);
    stores.push_back(decorate ? decorate(spec, std::move(store).value())
                              : std::move(store).value());
  }
  return CreateWith(std::move(specs), std::move(stores));
}

Status MountTable::Validate(const std::vector<MountSpec>& specs) {
  std::vector<std::shared_ptr<ufs::UnderStorage>> none(specs.size());
  for (const MountSpec& spec : specs) {
    CAIRN_RETURN_IF_ERROR(UfsOptionsFromSpec(spec).status());
    auto uri = ParseUri(spec.uri);
    if (!uri.ok()) return uri.status().WithContext("mount " + spec.path);
    if (uri->scheme != "file" && uri->scheme != "s3") {
      return InvalidArgumentError("mount " + spec.path + ": unknown source scheme '" + uri->scheme +
                                  "' (supported: file, s3)");
    }
  }
  return CreateWith(specs, std::move(none)).status();
}

StatusOr<std::shared_ptr<const MountTable>> MountTable::CreateWith(
    std::vector<MountSpec> specs, std::vector<std::shared_ptr<ufs::UnderStorage>> stores) {
  if (specs.size() != stores.size()) return InvalidArgumentError("one store per mount needed");
  std::shared_ptr<MountTable> table(new MountTable());
  std::set<std::string> paths;
  for (size_t i = 0; i < specs.size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(std::string path, NormalizePath(specs[i].path));
    if (!paths.insert(path).second) {
      return InvalidArgumentError("mount path " + path + " is listed twice");
    }
    specs[i].path = path;
    auto m = std::make_unique<Mount>();
    m->spec = std::move(specs[i]);
    m->ufs = std::move(stores[i]);
    m->object_id_prefix = m->ufs ? m->ufs->RootUri() : m->spec.uri;  // Null: Validate.
    table->mounts_.push_back(std::move(m));
  }
  for (const auto& a : table->mounts_) {
    for (const auto& b : table->mounts_) {
      if (a != b && IsUnder(b->spec.path, a->spec.path)) {
        return InvalidArgumentError("mount " + b->spec.path + " is nested in mount " +
                                    a->spec.path);
      }
    }
  }
  return std::shared_ptr<const MountTable>(std::move(table));
}

StatusOr<Resolved> MountTable::Resolve(std::string_view raw) const {
  CAIRN_ASSIGN_OR_RETURN(std::string path, NormalizePath(raw));
  for (const auto& m : mounts_) {
    const std::string& mp = m->spec.path;
    if (path == mp) return Resolved{m.get(), ""};
    if (IsUnder(path, mp)) {
      return Resolved{m.get(), path.substr(mp == "/" ? 1 : mp.size() + 1)};
    }
  }
  // The root always exists, as an empty folder when nothing is mounted yet (a cluster client
  // starts before the first `cairn mount add`).
  if (path == "/") return Resolved{nullptr, ""};
  for (const auto& m : mounts_) {
    if (IsUnder(m->spec.path, path)) return Resolved{nullptr, ""};
  }
  return NotFoundError("no such path '" + path + "'");
}

StatusOr<const Mount*> MountTable::FindByPath(std::string_view mount_path) const {
  for (const auto& m : mounts_) {
    if (m->spec.path == mount_path) return m.get();
  }
  return NotFoundError("no mount at '" + std::string(mount_path) + "'");
}

std::vector<std::string> MountTable::VirtualChildren(std::string_view dir) const {
  std::set<std::string> names;
  for (const auto& m : mounts_) {
    const std::string& mp = m->spec.path;
    if (!IsUnder(mp, dir)) continue;
    size_t start = dir == "/" ? 1 : dir.size() + 1;
    size_t end = mp.find('/', start);
    names.insert(mp.substr(start, end == std::string::npos ? std::string::npos : end - start));
  }
  return {names.begin(), names.end()};
}

}  // namespace cairn::mount
