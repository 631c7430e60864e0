#include "ufs/s3_url.h"

#include <algorithm>
#include <cctype>

namespace cairn::ufs::s3 {
namespace {

bool IsUnreserved(unsigned char c) {
  return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    // isalnum is locale-dependent for bytes >= 0x80; keep the check ASCII-only.
    if (c < 0x80 && (IsUnreserved(c) || (keep_slash && c == '/'))) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

StatusOr<std::string> UriDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) {
      return InvalidArgumentError("truncated %-escape in '" + std::string(s) + "'");
    }
    int hi = HexValue(s[i + 1]);
    int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) {
      return InvalidArgumentError("bad %-escape in '" + std::string(s) + "'");
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) {
    name = UriEncode(name, /*keep_slash=*/false);
    value = UriEncode(value, /*keep_slash=*/false);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

StatusOr<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint ep;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return InvalidArgumentError("S3 endpoint '" + std::string(url) +
                                "' needs a scheme (http:// or https://)");
  }
  for (char c : url.substr(0, sep)) {
    ep.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (ep.scheme != "http" && ep.scheme != "https") {
    return InvalidArgumentError("S3 endpoint '" + std::string(url) + "' must use http or https");
  }
  std::string_view rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return InvalidArgumentError("S3 endpoint '" + std::string(url) +
                                "' must not have a query or fragment");
  }
  size_t slash = rest.find('/');
  ep.host = std::string(rest.substr(0, slash));
  if (ep.host.empty()) {
    return InvalidArgumentError("S3 endpoint '" + std::string(url) + "' has no host");
  }
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    ep.base_path = std::string(path);
  }
  return ep;
}

bool IsDnsCompatibleBucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return false;
  }
  return bucket.front() != '-' && bucket.back() != '-' && bucket.front() != '.' &&
         bucket.back() != '.' && bucket.find("..") == std::string_view::npos;
}

std::string ObjectUrl(const Endpoint& endpoint, std::string_view bucket, bool path_style,
                      std::string_view key, std::string_view query) {
  std::string url = endpoint.scheme + "://";
  if (path_style) {
    url += endpoint.host + endpoint.base_path + "/" + UriEncode(bucket, /*keep_slash=*/false);
    if (!key.empty()) url += "/" + UriEncode(key, /*keep_slash=*/true);
  } else {
    url += std::string(bucket) + "." + endpoint.host + endpoint.base_path + "/" +
           UriEncode(key, /*keep_slash=*/true);
  }
  if (!query.empty()) {
    url += '?';
    url += query;
  }
  return url;
}

}  // namespace cairn::ufs::s3
