// Named crash points for the crash tests of write-back (docs/write-path.md, "Crash tests").
//
// When the environment variable CAIRN_CRASH_AT names a point, the process kills itself with
// SIGKILL the first time it reaches it: the same as `kill -9` at exactly that instant (no
// destructor, no flush, no atexit), which a test cannot time from outside. Unset (production),
// a crash point costs a function-static's initialisation check and an empty-string test.
//
// Points in use (grep for CrashPoint): write-back-journal-torn (half a journal record written),
// write-back-journaled (the record is durable, the client not yet answered),
// write-back-uploading (a closed file's upload is about to be completed: its parts are in the
// source as an unfinished multipart upload), write-back-committed (the
// object is in the source, the journal does not say so yet), write-back-handed-over (a renamed
// file is journaled at the owner of its new name, not yet dropped at the owner of the old one),
// write-back-rename-deleting and write-back-rename-deleted (a rename of a waiting file is about
// to delete, or has deleted, the old name's older object in the source, and has not journaled
// the move).
//
// Thread-safety: thread-safe.
#ifndef CAIRN_COMMON_CRASH_POINT_H_
#define CAIRN_COMMON_CRASH_POINT_H_

#include <string_view>

namespace cairn {

void CrashPoint(std::string_view name);
// Whether CAIRN_CRASH_AT names `name` (for a point that must prepare a torn state first).
bool CrashPointArmed(std::string_view name);

}  // namespace cairn

#endif  // CAIRN_COMMON_CRASH_POINT_H_
