// SpaceAccount: the byte-accounting rule of one cache folder. Pure: no I/O, no locks, no clock
// (CacheDir holds one under its mutex; space_account_test.cc checks the rule on its own).
//
// used() counts, in bytes of disk, everything the folder may occupy: its skeleton, every indexed
// page, reservations of pages being written, pages dropped from the index whose file is not
// unlinked yet (freeing), and files whose unlink failed (stuck). Admission keeps used() <=
// capacity at all times once the folder's contents are known (exact). Before that (the recovery
// scan is running) files not scanned yet are unknown, so a reservation must also fit in the
// credit: bytes known to be free (capacity minus what the whole file system used at startup)
// plus every byte released since. Every byte written during recovery is thus matched by a byte
// known to be free, and the folder never grows past its capacity even before its contents are
// known. Charges are the callers' (CacheDir::ChargeForFile).
//
// Invariants: reserved, freeing and stuck are parts of used; credit is 0 once exact.
// Thread-safety: none (the owner's lock).
#ifndef CAIRN_PAGESTORE_SPACE_ACCOUNT_H_
#define CAIRN_PAGESTORE_SPACE_ACCOUNT_H_

#include <algorithm>
#include <cstdint>

namespace cairn::pagestore {

class SpaceAccount {
 public:
  // `skeleton`: bytes the empty folder takes; `initial_credit`: bytes known to be free at start.
  SpaceAccount(uint64_t capacity, uint64_t skeleton, uint64_t initial_credit)
      : capacity_(capacity), used_(skeleton), credit_(initial_credit) {}

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t reserved() const { return reserved_; }
  uint64_t freeing() const { return freeing_; }
  uint64_t stuck() const { return stuck_; }
  uint64_t credit() const { return credit_; }
  bool exact() const { return exact_; }

  // Whether a page of `charge` bytes may be reserved now.
  bool Fits(uint64_t charge) const {
    if (used_ + charge > capacity_) return false;
    return exact_ || charge <= credit_;
  }
  // Bytes still to be evicted before `charge` fits, after what the drops in progress will free.
  uint64_t Deficit(uint64_t charge) const {
    uint64_t need = 0;
    if (used_ + charge > capacity_) need = used_ + charge - capacity_;
    if (!exact_ && charge > credit_) need = std::max(need, charge - credit_);
    return need > freeing_ ? need - freeing_ : 0;
  }
  // Bytes over the capacity once the drops in progress are done (a lowered capacity).
  uint64_t Excess() const {
    const uint64_t after = used_ - freeing_;
    return after > capacity_ ? after - capacity_ : 0;
  }
  // True if waiting can bring room without evicting: writes in flight become evictable pages,
  // drops in flight release bytes, and (while `scanning`) the scan finds evictable pages.
  bool RoomMayCome(bool scanning) const {
    return reserved_ > 0 || freeing_ > 0 || (!exact_ && scanning);
  }

  // A page is about to be written (Fits was true).
  void Reserve(uint64_t charge) {
    used_ += charge;
    reserved_ += charge;
    if (!exact_) credit_ -= charge;
  }
  // The write ended: its reservation became an indexed page's charge, or is Released next.
  void Unreserve(uint64_t charge) { reserved_ -= charge; }
  // Bytes no longer on disk (a failed write's reservation, an unlinked or replaced file).
  void Release(uint64_t bytes) {
    used_ -= bytes;
    if (!exact_) credit_ += bytes;
  }
  // A page found on disk by the scan or by name: it was there all along, so no credit moves.
  void Adopt(uint64_t charge) { used_ += charge; }
  // Bytes the scan found free in a sub-folder it listed (temp files it removed).
  void Credit(uint64_t bytes) {
    if (!exact_) credit_ += bytes;
  }
  // A page left the index; its file is unlinked next (FinishDrop).
  void StartDrop(uint64_t charge) { freeing_ += charge; }
  // The unlink of a StartDrop'ed file ended: released if `unlinked`, else counted as stuck (the
  // file is still there; a restart's scan finds it again).
  void FinishDrop(uint64_t charge, bool unlinked) {
    freeing_ -= charge;
    if (unlinked) {
      Release(charge);
    } else {
      stuck_ += charge;
    }
  }
  // Every sub-folder is scanned: used() is the whole truth from now on.
  void MarkExact() {
    exact_ = true;
    credit_ = 0;
  }

 private:
  const uint64_t capacity_;
  uint64_t used_;
  uint64_t reserved_ = 0;
  uint64_t freeing_ = 0;
  uint64_t stuck_ = 0;
  uint64_t credit_;
  bool exact_ = false;
};

}  // namespace cairn::pagestore

#endif  // CAIRN_PAGESTORE_SPACE_ACCOUNT_H_
