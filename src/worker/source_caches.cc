#include "worker/source_caches.h"

#include <algorithm>

#include "ufs/absence_caching_ufs.h"

namespace cairn::worker {

mount::MountTable::StoreDecorator SourceCaches(metrics::Registry* registry, Clock* clock) {
  metrics::Counter* answers = registry == nullptr
                                  ? nullptr
                                  : registry->AddCounter(kAbsentAnswersMetric, kAbsentAnswersHelp);
  metrics::Counter* outage = registry == nullptr
                                 ? nullptr
                                 : registry->AddCounter(kOutageAnswersMetric, kOutageAnswersHelp);
  return [clock, answers, outage](
             const MountSpec& spec,
             std::shared_ptr<ufs::UnderStorage> store) -> std::shared_ptr<ufs::UnderStorage> {
    if (spec.read_only || store == nullptr) return store;
    ufs::AbsenceCacheOptions options;
    if (answers != nullptr) options.on_absent_answer = [answers] { answers->Increment(); };
    if (outage != nullptr) options.on_outage_answer = [outage] { outage->Increment(); };
    if (spec.write_back) options.outage_ttl = kOutageListingAge;
    options.ttl = std::min<std::chrono::microseconds>(spec.metadata_ttl, kMaxAbsenceAge);
    if (options.ttl.count() <= 0) return store;  // Metadata not cached at all: ask every time.
    return std::make_shared<ufs::AbsenceCachingUnderStorage>(std::move(store), options, clock);
  };
}

}  // namespace cairn::worker
