#include "common/uri.h"

#include <cctype>

namespace cairn {

std::string Uri::ToString() const {
  if (scheme == "file") return "file://" + path;
  std::string out = scheme + "://" + authority;
  if (!path.empty()) out += "/" + path;
  return out;
}

StatusOr<Uri> ParseUri(std::string_view text) {
  size_t sep = text.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    return InvalidArgumentError("invalid source URI '" + std::string(text) +
                                "' (expected file:///path or s3://bucket/prefix)");
  }
  Uri uri;
  for (char c : text.substr(0, sep)) {
    uri.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::string_view rest = text.substr(sep + 3);
  if (uri.scheme == "file") {
    if (rest.empty() || rest[0] != '/') {
      return InvalidArgumentError("file URI needs an absolute path: '" + std::string(text) + "'");
    }
    uri.path = std::string(rest);
    while (uri.path.size() > 1 && uri.path.back() == '/') uri.path.pop_back();
    return uri;
  }
  size_t slash = rest.find('/');
  uri.authority = std::string(rest.substr(0, slash));
  if (uri.authority.empty()) {
    return InvalidArgumentError("URI '" + std::string(text) + "' has an empty bucket/host");
  }
  if (slash != std::string_view::npos) {
    std::string_view p = rest.substr(slash + 1);
    while (!p.empty() && p.back() == '/') p.remove_suffix(1);
    uri.path = std::string(p);
  }
  return uri;
}

}  // namespace cairn
