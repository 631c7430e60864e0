#include "mount/source_allow_list.h"

#include <string_view>

namespace cairn::mount {
namespace {

bool HasDotSegment(std::string_view path) {
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "." || part == "..") return true;
    i = j + 1;
  }
  return false;
}

// Whether `allowed` covers `uri` (same scheme and bucket, a path prefix on '/' boundaries).
bool Covers(const Uri& allowed, const Uri& uri) {
  if (allowed.scheme != uri.scheme || allowed.authority != uri.authority) return false;
  const std::string& a = allowed.path;
  if (a.empty() || a == "/") return true;
  if (!uri.path.starts_with(a)) return false;
  return uri.path.size() == a.size() || uri.path[a.size()] == '/';
}

std::string TrimSlashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

StatusOr<SourceAllowList> SourceAllowList::Create(const std::vector<std::string>& sources,
                                                  const std::vector<std::string>& endpoints) {
  SourceAllowList list;
  for (const std::string& s : sources) {
    StatusOr<Uri> uri = ParseUri(s);
    if (!uri.ok()) return uri.status().WithContext("allowed source");
    if (uri->scheme != "s3" && uri->scheme != "file") {
      return InvalidArgumentError("allowed source '" + s + "': only s3:// and file:// sources");
    }
    if (HasDotSegment(uri->path)) {
      return InvalidArgumentError("allowed source '" + s + "' has '.' or '..' segments");
    }
    list.sources_.push_back(std::move(uri).value());
  }
  for (const std::string& e : endpoints) {
    if (!e.starts_with("http://") && !e.starts_with("https://")) {
      return InvalidArgumentError("allowed endpoint '" + e + "' must be an http(s):// URL");
    }
    list.endpoints_.push_back(TrimSlashes(e));
  }
  return list;
}

Status SourceAllowList::Check(const MountSpec& spec) const {
  if (!sources_.empty()) {
    StatusOr<Uri> uri = ParseUri(spec.uri);
    if (!uri.ok()) return uri.status();
    if (HasDotSegment(uri->path)) {
      return PermissionDeniedError("source " + spec.uri + " has '.' or '..' segments");
    }
    bool covered = false;
    for (const Uri& allowed : sources_) covered |= Covers(allowed, *uri);
    if (!covered) {
      return PermissionDeniedError("source " + uri->ToString() +
                                   " is not in this worker's allowed sources (--allow-source)");
    }
  }
  auto endpoint = spec.options.find("endpoint");
  if (!endpoints_.empty() && endpoint != spec.options.end()) {
    const std::string wanted = TrimSlashes(endpoint->second);
    bool allowed = false;
    for (const std::string& e : endpoints_) allowed |= e == wanted;
    if (!allowed) {
      return PermissionDeniedError("endpoint " + wanted +
                                   " is not in this worker's allowed endpoints (--allow-endpoint)");
    }
  }
  return Status::Ok();
}

}  // namespace cairn::mount
