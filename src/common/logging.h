// Logging: spdlog (Debian's libspdlog) behind one init function. Modules call spdlog::info(...)
// etc. directly; messages go to stderr with a timestamp and level.
#ifndef CAIRN_COMMON_LOGGING_H_
#define CAIRN_COMMON_LOGGING_H_

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn {

// level: "trace", "debug", "info", "warn", "error", "off". InvalidArgument otherwise.
Status InitLogging(std::string_view level);

// The formatter of every log line: `pattern`, with control characters in the message escaped
// ("\n", "\r", "\t", "\xNN"). Messages quote names that come from peers and sources (object
// keys, paths): one such name must never start a forged log line of its own.
std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& pattern);

}  // namespace cairn

#endif  // CAIRN_COMMON_LOGGING_H_
