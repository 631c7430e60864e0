#include "pagestore/layout.h"

#include <cstdio>
#include <optional>

namespace cairn::pagestore {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Parses exactly 16 lowercase hex digits (the form ToHex writes; uppercase is not ours).
std::optional<uint64_t> ParseHex64(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

std::string Hex64(uint64_t v) {
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[i] = kHex[v & 15];
  return out;
}

}  // namespace

DirLayout::DirLayout(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string DirLayout::SubdirPath(int subdir) const {
  std::string out = VersionDir();
  out += '/';
  out += kHex[(subdir >> 4) & 15];
  out += kHex[subdir & 15];
  return out;
}

std::string DirLayout::PagePath(const Hash128& id) const {
  return SubdirPath(SubdirOf(id)) + "/" + id.ToHex();
}

std::string DirLayout::TempPath(const Hash128& id, uint64_t nonce, uint64_t sequence) const {
  return PagePath(id) + ".tmp-" + Hex64(nonce) + "-" + std::to_string(sequence);
}

DirLayout::ParsedName DirLayout::ParseName(std::string_view name) {
  ParsedName out;
  if (name.size() < 32) return out;
  auto high = ParseHex64(name.substr(0, 16));
  auto low = ParseHex64(name.substr(16, 16));
  if (!high || !low) return out;
  Hash128 id{*high, *low};
  if (name.size() == 32) {
    out.kind = NameKind::kPage;
    out.id = id;
    return out;
  }
  // "<32 hex>.tmp-<16 hex>-<digits>"
  std::string_view rest = name.substr(32);
  constexpr std::string_view kTmp = ".tmp-";
  if (rest.substr(0, kTmp.size()) != kTmp || rest.size() < kTmp.size() + 18) return out;
  auto nonce = ParseHex64(rest.substr(kTmp.size(), 16));
  std::string_view seq = rest.substr(kTmp.size() + 16);
  if (!nonce || seq[0] != '-' || seq.size() < 2) return out;
  for (char c : seq.substr(1)) {
    if (c < '0' || c > '9') return out;
  }
  out.kind = NameKind::kTemp;
  out.id = id;
  out.nonce = *nonce;
  return out;
}

}  // namespace cairn::pagestore
