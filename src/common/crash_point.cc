#include "common/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace cairn {

namespace {

// Read once: the environment does not change under a running process in the tests that use it.
const std::string& Armed() {
  static const std::string armed = [] {
    const char* value = std::getenv("CAIRN_CRASH_AT");
    return std::string(value == nullptr ? "" : value);
  }();
  return armed;
}

}  // namespace

bool CrashPointArmed(std::string_view name) {
  const std::string& armed = Armed();
  return !armed.empty() && armed == name;
}

void CrashPoint(std::string_view name) {
  if (!CrashPointArmed(name)) return;
  static constexpr char kMessage[] = "cairn: CAIRN_CRASH_AT reached, killing this process\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  ::kill(::getpid(), SIGKILL);
}

}  // namespace cairn
