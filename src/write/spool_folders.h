// Spool folders and the write-back journal their files belong to (docs/write-path.md, "Spool
// folders"; docs/write-journal.md, type 6).
//
// A worker's closed write-back files live in spool folders, one per cache folder, each on its
// own disk, and its journal names them. A start that finds a folder empty because its disk is
// not mounted yet must not take that for the truth: it would report the journal's files there
// as lost, and a first folder's disk missing would make a new journal and sweep the other
// folders' files as unknown, both after their closes were acknowledged. So each folder holds a
// stamp, "<dir>/SPOOL-SET", with the spool set of the journal that names its files (a random
// value the journal records once, WriteJournal::RecordSpoolSet), and a start checks the folders
// before it uses or sweeps any of them:
//   * a folder stamped with the journal's set is the one the files were written to;
//   * a folder without a stamp that the journal names files in, none of them there, is refused
//     (a disk not mounted; a folder of a worker from before stamps whose files are there is
//     stamped);
//   * a folder stamped with another set that holds files this journal does not name is refused
//     (the journal that names them is elsewhere: the first folder's disk is missing, or another
//     worker's folder was given);
//   * a file the journal names outside every spool folder, and there, is refused (the folder
//     was dropped from the configuration; nothing outside the spool folders is read or deleted
//     as a spool file); one not there is reported lost by its upload, as any file gone.
// An empty stamp is an operator's word that the folder is the journal's as it stands: its
// files there that are gone are reported lost, the others are swept (the refusals say so).
//
// Thread-safety: functions of the folders at a start, before anything else uses them.
#ifndef CAIRN_WRITE_SPOOL_FOLDERS_H_
#define CAIRN_WRITE_SPOOL_FOLDERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace cairn::write {

inline constexpr char kSpoolSetFile[] = "SPOOL-SET";
// Names of spool files (mkostemp templates): nothing else in a spool folder starts so.
inline constexpr char kSpoolFilePrefix[] = "write-";

// A new spool set's value (random, never 0).
uint64_t NewSpoolSet();

// Checks `dirs` (the spool folders, in any spelling) against the journal's `spool_set` (> 0)
// and the spool files it names (`named`, after WriteBack::RelocateSpoolFiles). Changes nothing.
// FailedPrecondition naming the folder, what was found and what an operator can do, in the
// cases above; Corruption for a stamp that is not one; IoError when a folder cannot be read.
Status CheckSpoolFolders(const std::vector<std::string>& dirs, uint64_t spool_set,
                         const std::vector<std::string>& named);

// Stamps each of `dirs` (made if missing) with `spool_set` where it is not stamped so: the
// stamp durable (written, synced, renamed, folder synced). Call once the journal has recorded
// the set (a crash in between leaves folders unstamped, which the next check accepts while the
// files are there). IoError.
Status StampSpoolFolders(const std::vector<std::string>& dirs, uint64_t spool_set);

}  // namespace cairn::write

#endif  // CAIRN_WRITE_SPOOL_FOLDERS_H_
