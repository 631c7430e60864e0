#include "ufs/part_layout.h"

#include <algorithm>
#include <string>

namespace cairn::ufs {

StatusOr<PartLayout> PartLayout::Create(uint64_t base) {
  if (base < kMinBase || base > kMaxBase) {
    return InvalidArgumentError("part size " + std::to_string(base) + " is outside [" +
                                std::to_string(kMinBase) + ", " + std::to_string(kMaxBase) + "]");
  }
  return PartLayout(base);
}

uint64_t PartLayout::Size(uint32_t index) const {
  return base_ << (std::min(index, kMaxParts - 1) / kPartsPerTier);
}

uint64_t PartLayout::Offset(uint32_t index) const {
  index = std::min(index, kMaxParts);
  const uint32_t tier = index / kPartsPerTier;
  // Tiers 0..tier-1 are full: kPartsPerTier * base * (2^tier - 1) bytes. At most
  // 1,000 * 2^30 * 2^10 = 2^50: no overflow.
  const uint64_t full_tiers = kPartsPerTier * base_ * ((uint64_t{1} << tier) - 1);
  return full_tiers + uint64_t{index % kPartsPerTier} * (base_ << tier);
}

StatusOr<uint32_t> PartLayout::PartOf(uint64_t offset) const {
  if (offset >= MaxSize()) {
    return InvalidArgumentError("offset " + std::to_string(offset) +
                                " is past the largest object of this layout (" +
                                std::to_string(MaxSize()) + " bytes)");
  }
  uint32_t tier = 0;
  while (tier + 1 < kMaxParts / kPartsPerTier && Offset((tier + 1) * kPartsPerTier) <= offset) {
    ++tier;
  }
  const uint64_t first = Offset(tier * kPartsPerTier);
  return tier * kPartsPerTier + static_cast<uint32_t>((offset - first) / (base_ << tier));
}

StatusOr<uint32_t> PartLayout::PartCount(uint64_t size) const {
  if (size == 0) return uint32_t{0};
  if (size > MaxSize()) {
    return InvalidArgumentError(
        "an object of " + std::to_string(size) + " bytes is larger than this layout holds (" +
        std::to_string(MaxSize()) + " bytes in " + std::to_string(kMaxParts) + " parts)");
  }
  CAIRN_ASSIGN_OR_RETURN(uint32_t last, PartOf(size - 1));
  return last + 1;
}

Status PartLedger::CheckFullPart(uint32_t index, uint64_t bytes) const {
  if (index >= PartLayout::kMaxParts) {
    return InvalidArgumentError("part " + std::to_string(index) + " is past the last part (" +
                                std::to_string(PartLayout::kMaxParts - 1) + ")");
  }
  if (bytes != layout_.Size(index)) {
    return InvalidArgumentError("part " + std::to_string(index) + " must be " +
                                std::to_string(layout_.Size(index)) + " bytes, got " +
                                std::to_string(bytes) + " (the final part comes with Commit)");
  }
  return Status::Ok();
}

StatusOr<uint32_t> PartLedger::CheckCommit(uint64_t size, uint64_t tail_bytes) const {
  CAIRN_ASSIGN_OR_RETURN(uint32_t count, layout_.PartCount(size));
  const uint64_t expected_tail = count == 0 ? 0 : size - layout_.Offset(count - 1);
  if (tail_bytes != expected_tail) {
    return InvalidArgumentError("the final part of a " + std::to_string(size) + "-byte object is " +
                                std::to_string(expected_tail) + " bytes, got " +
                                std::to_string(tail_bytes));
  }
  if (!parts_.empty() && parts_.rbegin()->first >= count) {
    return FailedPreconditionError(
        "part " + std::to_string(parts_.rbegin()->first) + " was written but a " +
        std::to_string(size) + "-byte object ends in part " +
        std::to_string(count == 0 ? 0 : count - 1) +
        "; a writer cannot leave written parts out: abort it and write again");
  }
  for (uint32_t i = 0; i + 1 < count; ++i) {
    auto it = parts_.find(i);
    if (it == parts_.end()) {
      return FailedPreconditionError("part " + std::to_string(i) + " of " + std::to_string(count) +
                                     " was never written");
    }
  }
  return count;
}

}  // namespace cairn::ufs
