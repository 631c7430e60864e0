// WrittenRanges: which byte ranges of a file being written have been written, as a set of
// disjoint, non-adjacent intervals. A write session asks it whether a whole part has been written
// (then that part can go to the source before the file is closed).
//
// Sequential writers keep one interval; random-offset writers (zip headers patched at the end,
// safetensors' header written last) a few. A writer scattering tiny writes could make many: the
// count is capped, and past the cap Add fails instead of growing without bound.
//
// Not thread-safe: the owning session locks around it. Inputs are checked before arithmetic
// (offsets come from peers).
#ifndef CAIRN_WRITE_WRITTEN_RANGES_H_
#define CAIRN_WRITE_WRITTEN_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <map>

#include "common/status.h"

namespace cairn::write {

class WrittenRanges {
 public:
  static constexpr size_t kDefaultMaxIntervals = 1 << 16;

  explicit WrittenRanges(size_t max_intervals = kDefaultMaxIntervals)
      : max_intervals_(max_intervals) {}

  // Records [offset, offset + length). InvalidArgument if the end overflows; ResourceExhausted
  // when the set would pass its cap (nothing is recorded then).
  Status Add(uint64_t offset, uint64_t length);
  // Whether every byte of [begin, end) was written (true for an empty range).
  bool Covers(uint64_t begin, uint64_t end) const;
  // Forgets everything at or past `size` (the file was truncated).
  void TruncateTo(uint64_t size);
  size_t interval_count() const { return intervals_.size(); }

 private:
  const size_t max_intervals_;
  std::map<uint64_t, uint64_t> intervals_;  // begin -> end (exclusive).
};

}  // namespace cairn::write

#endif  // CAIRN_WRITE_WRITTEN_RANGES_H_
