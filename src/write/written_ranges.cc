#include "write/written_ranges.h"

#include <algorithm>
#include <limits>
#include <string>

namespace cairn::write {

Status WrittenRanges::Add(uint64_t offset, uint64_t length) {
  if (length == 0) return Status::Ok();
  if (offset > std::numeric_limits<uint64_t>::max() - length) {
    return InvalidArgumentError("write at " + std::to_string(offset) + " of " +
                                std::to_string(length) + " bytes ends past 2^64");
  }
  uint64_t begin = offset;
  uint64_t end = offset + length;
  // The first interval that could touch [begin, end): the last one starting at or before it.
  auto it = intervals_.upper_bound(begin);
  if (it != intervals_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= begin) it = prev;
  }
  auto first = it;
  size_t merged = 0;
  while (it != intervals_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    ++it;
    ++merged;
  }
  if (merged == 0 && intervals_.size() >= max_intervals_) {
    return ResourceExhaustedError("more than " + std::to_string(max_intervals_) +
                                  " separate written ranges in one file");
  }
  intervals_.erase(first, it);
  intervals_.emplace(begin, end);
  return Status::Ok();
}

bool WrittenRanges::Covers(uint64_t begin, uint64_t end) const {
  if (begin >= end) return true;
  auto it = intervals_.upper_bound(begin);
  if (it == intervals_.begin()) return false;
  --it;
  return it->first <= begin && it->second >= end;
}

void WrittenRanges::TruncateTo(uint64_t size) {
  auto it = intervals_.lower_bound(size);
  intervals_.erase(it, intervals_.end());
  if (intervals_.empty()) return;
  auto last = std::prev(intervals_.end());
  last->second = std::min(last->second, size);
  if (last->first >= last->second) intervals_.erase(last);
}

}  // namespace cairn::write
