// PartLayout: how an object written in parts (ObjectWriter, ufs.h) is cut into them, and
// PartLedger: which of those parts a writer holds.
//
// S3 caps a multipart upload at 10,000 parts of at most 5 GiB, and every part but the last must
// be at least 5 MiB. A writer does not know the final size of a file while it is being written
// (a checkpoint grows as torch.save streams it), so one fixed part size would either waste
// requests on small files or cap large ones (8 MiB x 10,000 = 80 GB). The layout therefore grows:
// the first 1,000 parts have the base size, the next 1,000 twice that, and so on, doubling every
// 1,000 parts. With an 8 MiB base, the first 8 GB go in 8 MiB parts and the 10,000 parts reach
// 8 MiB x 1,000 x (2^10 - 1) = 8.2 TB (S3 itself stops at 5 TiB), the largest part being 4 GiB.
//
// Part i covers bytes [Offset(i), Offset(i) + Size(i)) of the object; the final part of an
// object of `size` bytes is the part holding byte size-1, and is cut short at `size`.
//
// Pure arithmetic, no I/O: thread-safe; every input is range-checked before it is used (a part
// index or a size can come from a peer).
#ifndef CAIRN_UFS_PART_LAYOUT_H_
#define CAIRN_UFS_PART_LAYOUT_H_

#include <cstdint>
#include <map>

#include "common/status.h"

namespace cairn::ufs {

class PartLayout {
 public:
  static constexpr uint32_t kMaxParts = 10'000;     // S3's limit.
  static constexpr uint32_t kPartsPerTier = 1'000;  // Parts of one size before it doubles.
  static constexpr uint64_t kMinBase = 1;           // S3 stores need >= 5 MiB; they check it.
  static constexpr uint64_t kMaxBase = 1ull << 30;  // Keeps every offset far from 2^64.

  // InvalidArgument unless kMinBase <= base <= kMaxBase.
  static StatusOr<PartLayout> Create(uint64_t base);

  uint64_t base() const { return base_; }
  // Size of part `index` (index < kMaxParts).
  uint64_t Size(uint32_t index) const;
  // Offset of the first byte of part `index` (index <= kMaxParts: Offset(kMaxParts) is MaxSize).
  uint64_t Offset(uint32_t index) const;
  // Largest object this layout can hold.
  uint64_t MaxSize() const { return Offset(kMaxParts); }
  // Number of parts of an object of `size` bytes (0 for an empty one). InvalidArgument past
  // MaxSize().
  StatusOr<uint32_t> PartCount(uint64_t size) const;
  // The part holding byte `offset`; InvalidArgument at or past MaxSize().
  StatusOr<uint32_t> PartOf(uint64_t offset) const;

 private:
  explicit PartLayout(uint64_t base) : base_(base) {}
  uint64_t base_;
};

// Which parts a writer has stored, and their sizes. Checks a WritePart against the layout and a
// Commit against what was stored. Not thread-safe: the writer that owns it locks around it.
class PartLedger {
 public:
  explicit PartLedger(PartLayout layout) : layout_(layout) {}

  const PartLayout& layout() const { return layout_; }
  // InvalidArgument unless `index` < kMaxParts and `bytes` == Size(index): only full parts go
  // through WritePart; the final, possibly short, part comes with Commit.
  Status CheckFullPart(uint32_t index, uint64_t bytes) const;
  // Records that part `index` is stored with `bytes` bytes (replacing an earlier copy).
  void Record(uint32_t index, uint64_t bytes) { parts_[index] = bytes; }
  bool Has(uint32_t index) const { return parts_.contains(index); }
  // For a Commit of `size` bytes whose final part has `tail_bytes`: InvalidArgument unless the
  // tail is exactly the final part's share of `size`; FailedPrecondition naming the first part
  // before the final one that was never stored, or a part stored past the final one (the object
  // shrank after it was written: radosgw refuses to complete an upload that leaves a part out,
  // so no store allows it). Returns the part count.
  StatusOr<uint32_t> CheckCommit(uint64_t size, uint64_t tail_bytes) const;
  const std::map<uint32_t, uint64_t>& parts() const { return parts_; }

 private:
  PartLayout layout_;
  std::map<uint32_t, uint64_t> parts_;  // index -> bytes stored.
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_PART_LAYOUT_H_
