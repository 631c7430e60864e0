#include "common/units.h"

#include <cctype>
#include <cstdio>
#include <limits>

namespace cairn {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "123abc" into 123 and "abc"; fails on no digits or overflow.
bool SplitNumber(std::string_view text, uint64_t* number, std::string* suffix) {
  size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  size_t start = i;
  uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    n = n * 10 + d;
    ++i;
  }
  if (i == start) return false;
  while (i < text.size() && text[i] == ' ') ++i;
  std::string_view rest = text.substr(i);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  *number = n;
  *suffix = Lower(rest);
  return true;
}

}  // namespace

StatusOr<uint64_t> ParseBytes(std::string_view text) {
  uint64_t n = 0;
  std::string suffix;
  if (!SplitNumber(text, &n, &suffix)) {
    return InvalidArgumentError("invalid size '" + std::string(text) +
                                "' (expected e.g. 4096, 64KiB, 10GiB)");
  }
  uint64_t mult = 0;
  if (suffix.empty() || suffix == "b")
    mult = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib")
    mult = 1ull << 10;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib")
    mult = 1ull << 20;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib")
    mult = 1ull << 30;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib")
    mult = 1ull << 40;
  else {
    return InvalidArgumentError("invalid size unit in '" + std::string(text) +
                                "' (use B, KiB, MiB, GiB or TiB)");
  }
  if (n > std::numeric_limits<uint64_t>::max() / mult) {
    return InvalidArgumentError("size '" + std::string(text) + "' is too large");
  }
  return n * mult;
}

StatusOr<std::chrono::microseconds> ParseDuration(std::string_view text) {
  uint64_t n = 0;
  std::string suffix;
  if (!SplitNumber(text, &n, &suffix)) {
    return InvalidArgumentError("invalid duration '" + std::string(text) +
                                "' (expected e.g. 500ms, 30s, 5m)");
  }
  uint64_t mult = 0;
  if (suffix == "us")
    mult = 1;
  else if (suffix == "ms")
    mult = 1000;
  else if (suffix.empty() || suffix == "s")
    mult = 1'000'000;
  else if (suffix == "m" || suffix == "min")
    mult = 60'000'000;
  else if (suffix == "h")
    mult = 3'600'000'000ull;
  else {
    return InvalidArgumentError("invalid duration unit in '" + std::string(text) +
                                "' (use us, ms, s, m or h)");
  }
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / mult) {
    return InvalidArgumentError("duration '" + std::string(text) + "' is too large");
  }
  return std::chrono::microseconds(static_cast<int64_t>(n * mult));
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace cairn
