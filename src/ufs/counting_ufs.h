// CountingUnderStorage: a pass-through decorator that counts requests and bytes, for tests that
// assert how much under-storage traffic something caused ("a cache hit made no UFS read", "a
// 1 MiB page fetched exactly 1 MiB"). Cheap enough to leave in a production stack.
//
// Thread-safety: safe for concurrent use; counters are relaxed atomics, so a snapshot taken while
// calls are in flight is consistent per counter, not across counters.
#ifndef CAIRN_UFS_COUNTING_UFS_H_
#define CAIRN_UFS_COUNTING_UFS_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "ufs/ufs.h"

namespace cairn::ufs {

struct UfsCounts {
  uint64_t stats = 0;
  uint64_t lists = 0;
  uint64_t reads = 0;
  uint64_t writes = 0;  // Commits of writers.
  uint64_t deletes = 0;
  uint64_t errors = 0;         // Calls that returned a non-OK status.
  uint64_t bytes_read = 0;     // Sum of what successful Reads returned.
  uint64_t bytes_written = 0;  // Bytes of parts stored by successful WriteParts and Commits.
  uint64_t requests() const { return stats + lists + reads + writes + deletes; }
};

class CountingUnderStorage : public UnderStorageWrapper {
 public:
  explicit CountingUnderStorage(std::shared_ptr<UnderStorage> target)
      : UnderStorageWrapper(std::move(target)) {}

  StatusOr<ObjectInfo> Stat(std::string_view key) override;
  StatusOr<ListResult> List(const ListOptions& options) override;
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override;
  // Counts each writer's Commit as one write; bytes_written adds the bytes of successful
  // WriteParts and of the final part of successful Commits.
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;
  Status Delete(std::string_view key) override;
  // Rename and MakeDir count as writes, RemoveDir as a delete.
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override;
  Status MakeDir(std::string_view key) override;
  Status RemoveDir(std::string_view key) override;

  // A snapshot of the counters.
  UfsCounts counts() const;
  void Reset();

 private:
  class Writer;

  void CountError(bool ok) {
    if (!ok) errors_.fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<uint64_t> stats_{0}, lists_{0}, reads_{0}, writes_{0}, deletes_{0}, errors_{0};
  std::atomic<uint64_t> bytes_read_{0}, bytes_written_{0};
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_COUNTING_UFS_H_
