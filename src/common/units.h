// Parsing and printing of sizes ("1MiB", "10G", "4096") and durations ("500ms", "30s", "2m").
// Pure functions; thread-safe.
#ifndef CAIRN_COMMON_UNITS_H_
#define CAIRN_COMMON_UNITS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn {

// Accepts an integer with an optional suffix: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all
// binary multiples; case-insensitive). Returns InvalidArgument for anything else, negative
// values or overflow.
StatusOr<uint64_t> ParseBytes(std::string_view text);

// Accepts an integer with a suffix: us, ms, s, m, h (a bare number means seconds).
StatusOr<std::chrono::microseconds> ParseDuration(std::string_view text);

// "1.5 MiB", "312 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace cairn

#endif  // CAIRN_COMMON_UNITS_H_
