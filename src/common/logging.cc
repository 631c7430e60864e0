#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

namespace cairn {

Status InitLogging(std::string_view level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgumentError("unknown log level '" + std::string(level) +
                                "' (use trace, debug, info, warn, error or off)");
  }
  auto logger = spdlog::stderr_color_mt("cairn");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::warn);
  return Status::Ok();
}

}  // namespace cairn
