// Internal to the policy module: LFU ("lfu") with ties broken by recency and periodic aging.
//
// Rule: the victim is the entry with the lowest use count; among equal counts, the one that
// reached that count least recently. An insert starts at count 1 (cold: 0, at the victim end);
// each access adds 1, saturating at 255.
//
// Structure (the classic O(1) LFU): one recency list per count 0..255 plus a 256-bit map of the
// non-empty ones, so an access is "unlink from list c, append to list c+1" and the victim is the
// head of the lowest non-empty list (a count-trailing-zeros over four words).
//
// Aging, so that an entry hot long ago does not stay forever: once per aging period (max(1024,
// 8 x entries) inserts plus accesses by default, the TinyLFU "reset" period) every count c >= 2
// becomes c/2 (0 and 1 stay). Halving maps the lists onto lower ones, so aging moves whole lists
// (list c is appended to list c/2, in ascending c): O(256) per period, never O(entries). Within
// a merged list the entries that had the lower count before the halving come first, then by
// recency. Counts stored in entries are brought up to date lazily: an entry records the aging
// epoch of its count and catches up (at most 8 halvings) when it is next touched.
//
// Per entry: nothing beyond the engine's record (count, epoch). Per group: 4 KiB of list heads
// (the same structure restricted to the group, for quota victims), freed when the group empties.
#ifndef CAIRN_POLICY_LFU_RANKING_H_
#define CAIRN_POLICY_LFU_RANKING_H_

#include <array>
#include <memory>
#include <unordered_map>

#include "policy/ranking.h"

namespace cairn::policy::internal {

class LfuRanking final : public Ranking {
 public:
  static constexpr int kLevels = 256;  // Counts 0..255.

  explicit LfuRanking(const RankingOptions& options) : options_(options) {}

  void InitState(Entry& e, bool cold) const override;
  void Insert(Slot* s, bool cold) override;
  void Adopt(Slot* s) override;
  void Access(Slot* s) override;
  void Remove(Slot* s, bool evicted) override;
  Slot* Victim(const VictimFilter* may_evict) const override;
  Slot* GroupVictim(uint32_t group, const VictimFilter* may_evict) const override;

 private:
  // One recency list per count, for one of the two link members.
  template <Link Entry::*kLink>
  struct Levels {
    std::array<SlotList<kLink>, kLevels> lists;
    std::array<uint64_t, kLevels / 64> nonempty{};  // Bit c set iff lists[c] is not empty.
    size_t entries = 0;

    void Add(int level, Slot* s, bool at_front);
    void Erase(int level, Slot* s);
    Slot* FirstAllowed(const VictimFilter* may_evict) const;
    void Halve();
  };
  using GroupLevels = Levels<&Entry::group_order>;

  // `e.frequency` brought up to the current epoch.
  uint8_t CurrentFrequency(Entry& e) const;
  void Place(Slot* s, int level, bool at_front);
  void Unplace(Slot* s, int level);
  // Counts one insert or access and halves every count when the period is over.
  void Tick();

  const RankingOptions options_;
  Levels<&Entry::order> all_;
  std::unordered_map<uint32_t, std::unique_ptr<GroupLevels>> groups_;  // None empty.
  // Number of halvings so far.
  uint32_t epoch_ = 0;
  uint64_t ops_since_aging_ = 0;
};

}  // namespace cairn::policy::internal

#endif  // CAIRN_POLICY_LFU_RANKING_H_
