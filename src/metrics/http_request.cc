#include "metrics/http_request.h"

#include <string_view>
#include <vector>

namespace cairn::metrics {
namespace {

using State = HeadParse::State;

// RFC 9110 token characters.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Control characters other than horizontal tab (DEL included).
bool HasControl(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return true;
  }
  return false;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

HeadParse Malformed(std::string why) {
  HeadParse parse;
  parse.state = State::kMalformed;
  parse.error = std::move(why);
  return parse;
}

// Fills method, path and version from the request line; returns an error text or "".
std::string ParseRequestLine(std::string_view line, HttpRequest* request) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return "request line is not 'METHOD target version'";
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return "invalid method";
  if (target.empty() || HasControl(target)) return "invalid request target";
  if (version == "HTTP/1.1") {
    request->minor_version = 1;
  } else if (version == "HTTP/1.0") {
    request->minor_version = 0;
  } else {
    return "unsupported HTTP version";
  }
  // Absolute form ("http://host/path"), which proxies send: keep only the path.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.starts_with(scheme)) {
      const size_t slash = target.find('/', scheme.size());
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  }
  if (target.front() != '/' && target != "*") return "invalid request target";
  request->method.assign(method);
  request->path.assign(target.substr(0, target.find('?')));
  return "";
}

// Applies one "name: value" field; returns an error text or "".
std::string ApplyHeader(std::string_view line, HttpRequest* request, bool* saw_length,
                        bool* saw_close, bool* saw_keep_alive) {
  if (line.front() == ' ' || line.front() == '\t') return "obsolete header line folding";
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "header line without ':'";
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = TrimOws(line.substr(colon + 1));
  if (!IsToken(name)) return "invalid header name";
  if (HasControl(value)) return "control character in header value";

  if (EqualsIgnoreCase(name, "Content-Length")) {
    if (value.empty() || value.size() > 18) return "invalid Content-Length";
    uint64_t length = 0;
    for (char c : value) {
      if (c < '0' || c > '9') return "invalid Content-Length";
      length = length * 10 + static_cast<uint64_t>(c - '0');
    }
    // Two different lengths are a request-smuggling signal (RFC 9112 section 6.3).
    if (*saw_length && length != request->content_length) return "conflicting Content-Length";
    *saw_length = true;
    request->content_length = length;
  } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
    request->has_transfer_encoding = true;
  } else if (EqualsIgnoreCase(name, "Connection")) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view option = TrimOws(rest.substr(0, comma));
      if (EqualsIgnoreCase(option, "close")) *saw_close = true;
      if (EqualsIgnoreCase(option, "keep-alive")) *saw_keep_alive = true;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return "";
}

}  // namespace

HeadParse ParseRequestHead(std::string_view buffer, size_t max_head_bytes) {
  // Split into lines up to the blank line that ends the head.
  size_t pos = 0;
  while (pos < buffer.size() && (buffer[pos] == '\r' || buffer[pos] == '\n')) ++pos;
  std::vector<std::string_view> lines;
  size_t head_size = 0;
  while (head_size == 0) {
    const size_t newline = buffer.find('\n', pos);
    if (newline == std::string_view::npos || newline >= max_head_bytes) {
      HeadParse parse;
      parse.state = buffer.size() > max_head_bytes ? State::kTooLarge : State::kIncomplete;
      return parse;
    }
    std::string_view line = buffer.substr(pos, newline - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      head_size = newline + 1;
    } else {
      lines.push_back(line);
    }
    pos = newline + 1;
  }

  HeadParse parse;
  std::string error = ParseRequestLine(lines.front(), &parse.request);
  if (!error.empty()) return Malformed(std::move(error));
  bool saw_length = false;
  bool saw_close = false;
  bool saw_keep_alive = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    error = ApplyHeader(lines[i], &parse.request, &saw_length, &saw_close, &saw_keep_alive);
    if (!error.empty()) return Malformed(std::move(error));
  }
  parse.request.keep_alive = !saw_close && (parse.request.minor_version >= 1 || saw_keep_alive);
  parse.state = State::kComplete;
  parse.head_size = head_size;
  return parse;
}

}  // namespace cairn::metrics
