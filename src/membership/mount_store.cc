#include "membership/mount_store.h"

#include <algorithm>

#include "membership/document_edit.h"
#include "membership/records.h"
#include "mount/mount_table.h"

namespace cairn::membership {
namespace {

constexpr const char* kSecretOptions[] = {"access_key", "secret_key", "session_token"};

StatusOr<std::vector<MountSpec>> DecodeStored(std::string_view value) {
  StatusOr<std::vector<MountSpec>> mounts = DecodeMountTable(value);
  if (!mounts.ok()) {
    return CorruptionError("stored mount table at " + std::string(kMountTableKey) + ": " +
                           mounts.status().message());
  }
  return mounts;
}

// Equal as stored (metadata_ttl at millisecond granularity, like the document).
bool SameAsStored(const MountSpec& a, const MountSpec& b) {
  return EncodeMountTable({a}) == EncodeMountTable({b});
}

}  // namespace

Status ValidateMountForStore(const MountSpec& spec) {
  StatusOr<std::string> normalized = mount::NormalizePath(spec.path);
  if (!normalized.ok()) return normalized.status();
  if (*normalized != spec.path) {
    return InvalidArgumentError("mount path '" + spec.path + "' is not normalised (expected '" +
                                *normalized + "')");
  }
  const std::string where = "mount " + spec.path;
  if (spec.uri.empty()) return InvalidArgumentError(where + ": no source URI");
  for (const char* secret : kSecretOptions) {
    if (spec.options.count(secret) != 0) {
      return InvalidArgumentError(where + ": option " + secret +
                                  ": secrets are not stored in etcd: use profile=NAME or the "
                                  "workers' environment");
    }
  }
  if (spec.replicas < 1 || spec.replicas > kMaxMountReplicas) {
    return InvalidArgumentError(where + ": replicas must be 1.." +
                                std::to_string(kMaxMountReplicas) + ", got " +
                                std::to_string(spec.replicas));
  }
  if (spec.metadata_ttl.count() < 0) {
    return InvalidArgumentError(where + ": metadata TTL must not be negative");
  }
  bool utf8 = IsValidUtf8(spec.path) && IsValidUtf8(spec.uri);
  for (const auto& [name, value] : spec.options)
    utf8 = utf8 && IsValidUtf8(name) && IsValidUtf8(value);
  if (!utf8) return InvalidArgumentError(where + ": paths, URIs and options must be UTF-8");
  return Status::Ok();
}

StatusOr<std::vector<MountSpec>> ParseMountTableSnapshot(const PrefixMirror::Snapshot& snapshot) {
  auto it = snapshot.find(std::string(kMountTableKey));
  if (it == snapshot.end()) return std::vector<MountSpec>();
  CAIRN_ASSIGN_OR_RETURN(std::vector<MountSpec> mounts, DecodeMountTable(it->second));
  for (const MountSpec& m : mounts) {
    Status st = ValidateMountForStore(m);
    if (!st.ok()) return st.WithContext("mount table");
  }
  return mounts;
}

MountStore::MountStore(Coordination* coord) : coord_(coord) {}

StatusOr<std::vector<MountSpec>> MountStore::List() {
  StatusOr<KeyValue> kv = coord_->Get(kMountTableKey);
  if (!kv.ok()) {
    if (kv.status().code() == StatusCode::kNotFound) return std::vector<MountSpec>();
    return kv.status();
  }
  return DecodeStored(kv->value);
}

Status MountStore::Add(const MountSpec& spec, bool replace) {
  MountSpec mount = spec;
  CAIRN_ASSIGN_OR_RETURN(mount.path, mount::NormalizePath(spec.path));
  CAIRN_RETURN_IF_ERROR(ValidateMountForStore(mount));
  return Update([&](std::vector<MountSpec>* mounts, bool* unchanged) -> Status {
    auto it = std::find_if(mounts->begin(), mounts->end(),
                           [&](const MountSpec& m) { return m.path == mount.path; });
    if (it != mounts->end()) {
      if (!replace) {
        return AlreadyExistsError("mount " + mount.path + " already exists (source " + it->uri +
                                  ")");
      }
      if (SameAsStored(*it, mount)) {
        *unchanged = true;
        return Status::Ok();
      }
      *it = mount;
    } else {
      mounts->push_back(mount);
    }
    // The rules across mounts (unique, not nested) and each URI and option, as workers will
    // apply them when they build their table; without opening the sources, which this machine
    // may not have or reach.
    return mount::MountTable::Validate(*mounts);
  });
}

Status MountStore::Remove(std::string_view path) {
  CAIRN_ASSIGN_OR_RETURN(std::string normalized, mount::NormalizePath(path));
  return Update([&](std::vector<MountSpec>* mounts, bool*) -> Status {
    auto it = std::find_if(mounts->begin(), mounts->end(),
                           [&](const MountSpec& m) { return m.path == normalized; });
    if (it == mounts->end()) return NotFoundError("no mount at " + normalized);
    mounts->erase(it);
    return Status::Ok();
  });
}

Status MountStore::Update(
    const std::function<Status(std::vector<MountSpec>* mounts, bool* unchanged)>& edit) {
  using Mounts = std::vector<MountSpec>;
  return EditDocument<Mounts>(
      coord_, kMountTableKey, "mount table",
      [](std::string_view stored, Mounts* mounts) {
        CAIRN_ASSIGN_OR_RETURN(*mounts, DecodeStored(stored));
        return Status::Ok();
      },
      edit, EncodeMountTable);
}

}  // namespace cairn::membership
