#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <spdlog/pattern_formatter.h>

#include <memory>
#include <string>

namespace cairn {
namespace {

constexpr char kPattern[] = "%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v";

bool NeedsEscape(unsigned char c) { return c < 0x20 || c == 0x7f; }

class EscapingFormatter : public spdlog::formatter {
 public:
  explicit EscapingFormatter(std::string pattern)
      : pattern_(pattern),
        inner_(std::make_unique<spdlog::pattern_formatter>(std::move(pattern))) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    bool clean = true;
    for (char c : text) clean = clean && !NeedsEscape(static_cast<unsigned char>(c));
    if (clean) {
      inner_->format(msg, dest);
      return;
    }
    std::string escaped;
    escaped.reserve(text.size() + 16);
    for (char c : text) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (!NeedsEscape(u)) {
        escaped += c;
      } else if (c == '\n') {
        escaped += "\\n";
      } else if (c == '\r') {
        escaped += "\\r";
      } else if (c == '\t') {
        escaped += "\\t";
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        escaped += "\\x";
        escaped += kHex[u >> 4];
        escaped += kHex[u & 15];
      }
    }
    spdlog::details::log_msg copy(msg);
    copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
    inner_->format(copy, dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<EscapingFormatter>(pattern_);
  }

 private:
  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> inner_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& pattern) {
  return std::make_unique<EscapingFormatter>(pattern);
}

Status InitLogging(std::string_view level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgumentError("unknown log level '" + std::string(level) +
                                "' (use trace, debug, info, warn, error or off)");
  }
  auto logger = spdlog::stderr_color_mt("cairn");
  logger->set_formatter(MakeLogFormatter(kPattern));
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::warn);
  return Status::Ok();
}

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return out;
}

}  // namespace cairn
