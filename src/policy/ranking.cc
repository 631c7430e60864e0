#include "policy/ranking.h"

#include "policy/lfu_ranking.h"
#include "policy/list_ranking.h"
#include "policy/ml_ranking.h"

namespace cairn::policy::internal {

std::unique_ptr<Ranking> MakeRanking(RankingKind kind, const RankingOptions& options) {
  switch (kind) {
    case RankingKind::kLru:
      return std::make_unique<ListRanking>(/*reorder_on_access=*/true);
    case RankingKind::kFifo:
      return std::make_unique<ListRanking>(/*reorder_on_access=*/false);
    case RankingKind::kLfu:
      return std::make_unique<LfuRanking>(options);
    case RankingKind::kMl:
      return std::make_unique<MlRanking>();
  }
  return std::make_unique<ListRanking>(/*reorder_on_access=*/true);  // Unreachable.
}

}  // namespace cairn::policy::internal
