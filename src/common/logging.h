// Logging: spdlog (Debian's libspdlog) behind one init function. Modules call spdlog::info(...)
// etc. directly; messages go to stderr with a timestamp and level.
#ifndef CAIRN_COMMON_LOGGING_H_
#define CAIRN_COMMON_LOGGING_H_

#include <spdlog/spdlog.h>

#include <string_view>

#include "common/status.h"

namespace cairn {

// level: "trace", "debug", "info", "warn", "error", "off". InvalidArgument otherwise.
Status InitLogging(std::string_view level);

}  // namespace cairn

#endif  // CAIRN_COMMON_LOGGING_H_
