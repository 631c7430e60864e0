// Internal to the policy module: the per-entry record PolicyEngine keeps and the intrusive lists
// its rankings thread through it.
//
// Why intrusive: PolicyEngine stores one record per entry in a single hash map and every ranking
// (LRU, FIFO, LFU, ML; one per priority class) links that record into its own lists in place. A
// ranking therefore needs no second map and no allocation per operation, which keeps the cost per
// entry at about 104 bytes (docs/policies.md) and every operation O(1).
//
// A record lives in an std::unordered_map node, whose address is stable until the entry is erased,
// so lists point straight at the map's value_type (`Slot`) and read the id from `slot->first`.
//
// Thread-safety: none; owned and serialized by PolicyEngine.
#ifndef CAIRN_POLICY_ENTRY_LIST_H_
#define CAIRN_POLICY_ENTRY_LIST_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "common/checksum.h"
#include "policy/eviction_policy.h"

namespace cairn::policy::internal {

struct Entry;
// The hash map's value type; naming it here does not need Entry to be complete.
using Slot = std::pair<const Hash128, Entry>;

struct Link {
  Slot* prev = nullptr;
  Slot* next = nullptr;
};

// Flag bits of Entry::flags (used by MlRanking).
inline constexpr uint8_t kFlagHit = 1;        // Accessed since it was inserted.
inline constexpr uint8_t kFlagProbation = 2;  // Inserted at the victim end, not yet hit.
inline constexpr uint8_t kFlagCold = 4;       // Inserted cold (found at startup), not yet hit.

// 64 bytes; with the map node (next pointer + 16-byte key) an entry costs one 96-byte malloc chunk
// plus 8 bytes of bucket array.
struct Entry {
  Link order;        // Position in the ranking's order over all its entries.
  Link group_order;  // Position in the ranking's order over the entries of `group` only.
  uint64_t bytes = 0;
  int64_t expires_at_us = 0;  // 0: no TTL.
  uint32_t group = 0;
  uint32_t epoch = 0;  // LfuRanking: the aging epoch `frequency` was last brought up to date in.
  Priority priority = Priority::kNormal;
  bool pinned = false;
  uint8_t frequency = 0;  // LfuRanking: use count, 0..255.
  uint8_t flags = 0;      // kFlag* bits.
};
static_assert(sizeof(Entry) <= 64, "keep the per-entry record within one cache line");

// Ids are already uniformly distributed hashes; the mix only guards against ids built from small
// counters (tests, simulators). noexcept matters: libstdc++ then stores no hash code per node.
struct IdHash {
  size_t operator()(const Hash128& id) const noexcept {
    return static_cast<size_t>((id.high * 0x9E3779B97F4A7C15ULL) ^ id.low);
  }
};

// A doubly linked list threaded through the `kLink` member of each entry. front() is the victim
// end (next to evict), back() the protected end. An entry is in at most one list per link member.
template <Link Entry::*kLink>
class SlotList {
 public:
  bool empty() const { return head_ == nullptr; }
  Slot* front() const { return head_; }
  static Slot* Next(const Slot* s) { return (s->second.*kLink).next; }

  void PushFront(Slot* s) {
    Link& l = s->second.*kLink;
    l.prev = nullptr;
    l.next = head_;
    if (head_ != nullptr) (head_->second.*kLink).prev = s;
    head_ = s;
    if (tail_ == nullptr) tail_ = s;
  }

  void PushBack(Slot* s) {
    Link& l = s->second.*kLink;
    l.next = nullptr;
    l.prev = tail_;
    if (tail_ != nullptr) (tail_->second.*kLink).next = s;
    tail_ = s;
    if (head_ == nullptr) head_ = s;
  }

  // `s` must be in this list.
  void Erase(Slot* s) {
    Link& l = s->second.*kLink;
    if (l.prev != nullptr) {
      (l.prev->second.*kLink).next = l.next;
    } else {
      head_ = l.next;
    }
    if (l.next != nullptr) {
      (l.next->second.*kLink).prev = l.prev;
    } else {
      tail_ = l.prev;
    }
    l = Link{};
  }

  void MoveToBack(Slot* s) {
    if (tail_ == s) return;
    Erase(s);
    PushBack(s);
  }

  // Moves every entry of `other` behind this list's entries, keeping their order. O(1).
  void Append(SlotList& other) {
    if (other.empty()) return;
    if (empty()) {
      head_ = other.head_;
    } else {
      (tail_->second.*kLink).next = other.head_;
      (other.head_->second.*kLink).prev = tail_;
    }
    tail_ = other.tail_;
    other.head_ = other.tail_ = nullptr;
  }

  // The first entry from the victim end that `may_evict` accepts (any entry if null), or null.
  // O(entries rejected).
  Slot* FirstAllowed(const VictimFilter* may_evict) const {
    for (Slot* s = head_; s != nullptr; s = Next(s)) {
      if (may_evict == nullptr || (*may_evict)(s->first)) return s;
    }
    return nullptr;
  }

 private:
  Slot* head_ = nullptr;
  Slot* tail_ = nullptr;
};

}  // namespace cairn::policy::internal

#endif  // CAIRN_POLICY_ENTRY_LIST_H_
