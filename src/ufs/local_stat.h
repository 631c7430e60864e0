// Internal to the local store: ObjectInfo from a stat(2) result (shared by local_ufs.cc and
// local_list.cc). Not for use outside src/ufs.
#ifndef CAIRN_UFS_LOCAL_STAT_H_
#define CAIRN_UFS_LOCAL_STAT_H_

#include <sys/stat.h>

#include "ufs/ufs.h"

namespace cairn::ufs::internal {

// Size, mtime and version of a regular file; `key` is left empty for the caller to fill.
ObjectInfo LocalInfoFromStat(const struct stat& st);

}  // namespace cairn::ufs::internal

#endif  // CAIRN_UFS_LOCAL_STAT_H_
