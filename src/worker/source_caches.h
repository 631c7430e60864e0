// What a worker keeps in front of each mount's source, and why only a worker may.
//
// A writable mount's store gets an AbsenceCachingUnderStorage (src/ufs/absence_caching_ufs.h):
// new names in a folder the worker listed less than min(metadata TTL, 5 s) ago are known
// absent without a request (the lookup and the open of every new file of a sharded checkpoint
// used to cost a HEAD and a LIST each). It is safe in the worker because every change Cairn
// makes to a path goes through the worker that owns the path (the one that answers its stats),
// through this very store; a client's own store does not see the writes its worker makes, so
// clients never get one. Read-only mounts are left as they are: nothing is created there
// through Cairn, and their lookups are answered from listings on the client already.
#ifndef CAIRN_WORKER_SOURCE_CACHES_H_
#define CAIRN_WORKER_SOURCE_CACHES_H_

#include <chrono>

#include "common/clock.h"
#include "metrics/registry.h"
#include "mount/mount_table.h"

namespace cairn::worker {

// The longest a worker's "absent" may be out of date for names created by others (tools
// writing to the bucket directly): the same window as a client's SEEN_ABSENT (protocol v10).
inline constexpr std::chrono::seconds kMaxAbsenceAge{5};

// Write-back mounts: while the source cannot be reached, listings up to this old answer
// lookups of new names (absent) and of folders (there), so a job keeps creating files (a
// checkpoint in a folder it wrote to before) through a lake outage; the files wait in the
// journal and commit on the name being absent, so a wrong answer sets a file aside and never
// overwrites (docs/consistency.md, "Write-back mounts").
inline constexpr std::chrono::hours kOutageListingAge{1};

// The counters of what the caches answer (docs/metrics.md).
inline constexpr const char* kAbsentAnswersMetric = "cairn_worker_source_absent_answers_total";
inline constexpr const char* kAbsentAnswersHelp =
    "Lookups of names a recent listing of their folder showed absent, answered without a source "
    "request";
inline constexpr const char* kOutageAnswersMetric = "cairn_worker_source_outage_answers_total";
inline constexpr const char* kOutageAnswersHelp =
    "Lookups on write-back mounts answered from a listing up to an hour old because the source "
    "could not be reached";

// Counts what the caches answer in `registry` (the two counters above) when set. Neither is owned;
// both must outlive the stores (null clock: Clock::Real()).
mount::MountTable::StoreDecorator SourceCaches(metrics::Registry* registry, Clock* clock = nullptr);

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_SOURCE_CACHES_H_
