#include "mount/namespace_ops.h"

#include <algorithm>

namespace cairn::mount {

StatusOr<Entry> StatKey(const Mount& mount, const std::string& key, const std::string& name) {
  auto object = mount.ufs->Stat(key);
  Entry entry;
  entry.name = name;
  if (object.ok()) {
    entry.size = object->size;
    entry.version = object->version;
    entry.mtime_ns = object->mtime_ns;
    return entry;
  }
  if (object.status().code() != StatusCode::kNotFound) return object.status();
  // Not an object: a directory if anything lives under "key/", or it exists empty (a folder,
  // an S3 "key/" marker).
  ufs::ListOptions probe;
  probe.prefix = key + "/";
  probe.max_keys = 1;
  CAIRN_ASSIGN_OR_RETURN(ufs::ListResult listed, mount.ufs->List(probe));
  if (listed.objects.empty() && listed.common_prefixes.empty() && !listed.directory_exists) {
    return NotFoundError("no such file or directory: " + key);
  }
  entry.is_dir = true;
  return entry;
}

StatusOr<Listing> ListDirectory(const Mount& mount, const std::string& key,
                                const std::string& token, int max_entries) {
  ufs::ListOptions lo;
  lo.prefix = key.empty() ? "" : key + "/";
  lo.delimiter = "/";
  lo.continuation_token = token;
  lo.max_keys = std::clamp(max_entries, 1, 1000);
  CAIRN_ASSIGN_OR_RETURN(ufs::ListResult listed, mount.ufs->List(lo));
  Listing page;
  page.next_token = std::move(listed.next_token);
  for (ufs::ObjectInfo& o : listed.objects) {
    std::string name = o.key.substr(std::min(o.key.size(), lo.prefix.size()));
    if (name.empty() || name.find('/') != std::string::npos) continue;  // "dir/" markers.
    Entry entry;
    entry.name = std::move(name);
    entry.size = o.size;
    entry.version = std::move(o.version);
    entry.mtime_ns = o.mtime_ns;
    page.entries.push_back(std::move(entry));
  }
  for (const std::string& prefix : listed.common_prefixes) {
    std::string name = prefix.substr(std::min(prefix.size(), lo.prefix.size()));
    while (!name.empty() && name.back() == '/') name.pop_back();
    if (name.empty() || name.find('/') != std::string::npos) continue;
    Entry entry;
    entry.name = std::move(name);
    entry.is_dir = true;
    page.entries.push_back(std::move(entry));
  }
  // Objects were added first: an object wins over the prefix of the same name.
  SortUniqueByName(page.entries);
  return page;
}

void SortUniqueByName(std::vector<Entry>& entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.name < b.name; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& a, const Entry& b) { return a.name == b.name; }),
                entries.end());
}

}  // namespace cairn::mount
