// Heap buffers whose address is a multiple of kDirectIoAlignment, so that a read with O_DIRECT
// (which the kernel refuses for a misaligned buffer) can land in them. Used for the client's page
// buffer slots: a whole page read from a local page file goes straight from the disk into the
// slot, without the kernel's page-cache copy.
// Thread-safety: plain values.
#ifndef CAIRN_COMMON_ALIGNED_BUFFER_H_
#define CAIRN_COMMON_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace cairn {

// The alignment O_DIRECT asks of the buffer, the file offset and the length on every Linux file
// system we run on (the logical block size is 512 or 4096 bytes).
inline constexpr size_t kDirectIoAlignment = 4096;

struct AlignedDelete {
  void operator()(char* p) const { ::operator delete[](p, std::align_val_t{kDirectIoAlignment}); }
};

// `n` uninitialised bytes at a kDirectIoAlignment-aligned address; freed with AlignedDelete.
using AlignedBytes = std::unique_ptr<char[], AlignedDelete>;

inline AlignedBytes AllocateAligned(size_t n) {
  return AlignedBytes(
      static_cast<char*>(::operator new[](n, std::align_val_t{kDirectIoAlignment})));
}

// True if `p`, `offset` and `length` all allow an O_DIRECT transfer.
inline bool DirectIoAligned(const void* p, uint64_t offset, size_t length) {
  return reinterpret_cast<uintptr_t>(p) % kDirectIoAlignment == 0 &&
         offset % kDirectIoAlignment == 0 && length % kDirectIoAlignment == 0;
}

}  // namespace cairn

#endif  // CAIRN_COMMON_ALIGNED_BUFFER_H_
