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

// `text` for a message that may reach a terminal (an error built from what a peer, etcd or a
// file said): at most `max_bytes` of it, control characters and non-ASCII bytes as '?'.
std::string Printable(std::string_view text, size_t max_bytes = 200);

}  // namespace cairn

#endif  // CAIRN_COMMON_LOGGING_H_
