// Small whole-file reads, careful writes of credentials (keys, certificates, tokens), and
// folder syncs.
// Thread-safety: pure functions over the file system.
#ifndef CAIRN_COMMON_FILE_UTIL_H_
#define CAIRN_COMMON_FILE_UTIL_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "common/status.h"

namespace cairn {

// The whole of a small file. NotFound (naming the path and the reason) when it cannot be
// opened; InvalidArgument when it holds more than `max_bytes` (a key file is a few hundred
// bytes: a huge one is a mistake, and is not read into memory).
StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes = 1 << 20);

// Writes `text` to `path` with `mode` (whatever the umask) through a fresh temporary file
// (O_EXCL: never one someone else created in a shared folder, which would then hold a private
// key), fsync and rename. AlreadyExists when `path` exists and !force (a CA key overwritten by
// mistake orphans every certificate it signed); IoError otherwise.
Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode, bool force);

// fsync(2) of the folder that holds `path` ("." for a bare name): makes a file created, renamed
// or removed there durable (a file's own fsync does not cover its name, by POSIX). IoError (or
// the errno's status) when the folder cannot be opened or synced.
Status SyncFolderOf(const std::string& path);

}  // namespace cairn

#endif  // CAIRN_COMMON_FILE_UTIL_H_
