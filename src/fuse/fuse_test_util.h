// Helpers for the real-mount FUSE tests: temp dirs, /proc/self/mounts checks, shell commands,
// deterministic test data. Test-only code.
#ifndef CAIRN_FUSE_FUSE_TEST_UTIL_H_
#define CAIRN_FUSE_FUSE_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace cairn::fuse::testing {

// Creates a fresh directory under $TMPDIR (or /tmp); aborts the test binary if it cannot.
std::string MakeTempDir();

// The /proc/self/mounts line whose mount point is `path` (octal escapes decoded), or "".
std::string MountLine(const std::string& path);
// True when `path` is the mount point of a FUSE filesystem.
bool IsFuseMounted(const std::string& path);
// Lazily unmounts `path` if it is a FUSE mount (fusermount3 -u -z, then umount2 MNT_DETACH).
void ForceUnmount(const std::string& path);

// Polls `done` every 10 ms until it returns true or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));

struct CommandResult {
  int exit_code = -1;  // -1 when the command did not exit normally.
  std::string output;  // stdout only.
};
// Runs `command` with /bin/sh, capturing stdout.
CommandResult RunCommand(const std::string& command);
// Single-quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s);

// `size` pseudo-random bytes determined by `seed`.
std::string TestBytes(size_t size, uint64_t seed);

// Reads a whole file with open/read/close; sets *err to errno (0 on success).
std::string ReadWholeFile(const std::string& path, int* err);

}  // namespace cairn::fuse::testing

#endif  // CAIRN_FUSE_FUSE_TEST_UTIL_H_
