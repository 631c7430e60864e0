// FaultInjectingDisk: a pagestore::Disk decorator for tests that fails chosen operations, holds
// them at a Gate, and counts them, so a page store test can put a write, a rename or a recovery
// listing exactly where it wants it (instead of a hand-written DiskWrapper per test).
//
// Faults: FailNext(op, error, n) makes the next n calls of `op` return `error` without reaching
// the disk (n < 0: every call until Clear(op)). Holds: Hold(op, gate, when, after, count) makes
// calls of `op` wait at `gate`, before or after the real call ran (a listing held after it was
// taken leaves the scan with a stale view): of the calls made from then on, the first `after`
// pass, the next `count` wait (count < 0: all of them). Counts: calls(op).
//
// Thread-safety: safe for concurrent use; faults and holds may be changed while calls run.
#ifndef CAIRN_TESTING_FAULT_INJECTING_DISK_H_
#define CAIRN_TESTING_FAULT_INJECTING_DISK_H_

#include <array>
#include <atomic>
#include <memory>

#include "common/thread_annotations.h"
#include "pagestore/disk.h"
#include "testing/gate.h"

namespace cairn::testing {

enum class DiskOp { kStat, kOpenForRead, kWriteNewFile, kRename, kUnlink, kListDir, kCount };

class FaultInjectingDisk : public pagestore::DiskWrapper {
 public:
  enum class When { kBefore, kAfter };

  explicit FaultInjectingDisk(std::shared_ptr<pagestore::Disk> target)
      : DiskWrapper(std::move(target)) {}

  void FailNext(DiskOp op, Status error, int times = 1) EXCLUDES(mu_);
  void Clear(DiskOp op) EXCLUDES(mu_);
  // See the file comment. A null gate: no hold.
  void Hold(DiskOp op, std::shared_ptr<Gate> gate, When when = When::kBefore, int after = 0,
            int count = -1) EXCLUDES(mu_);
  uint64_t calls(DiskOp op) const { return calls_[Index(op)].load(); }

  StatusOr<pagestore::FileInfo> Stat(const std::string& path) override;
  StatusOr<std::unique_ptr<pagestore::RandomAccessFile>> OpenForRead(
      const std::string& path) override;
  Status WriteNewFile(const std::string& path,
                      std::span<const std::span<const char>> pieces) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Unlink(const std::string& path) override;
  StatusOr<std::vector<pagestore::DirEntry>> ListDir(const std::string& path) override;

 private:
  struct Rule {
    Status error;
    int fail_left = 0;  // < 0: every call.
    std::shared_ptr<Gate> gate;
    When when = When::kBefore;
    int hold_from = 0;   // Calls numbered hold_from.. wait,
    int hold_until = 0;  // up to hold_until (exclusive; < 0: no end).
  };
  static size_t Index(DiskOp op) { return static_cast<size_t>(op); }
  // Counts the call; returns the error it must fail with (OK: go on) and the gate to pass
  // before (*before) or after (*after) the real call.
  Status Enter(DiskOp op, std::shared_ptr<Gate>* before, std::shared_ptr<Gate>* after)
      EXCLUDES(mu_);
  // Runs `call` under op's rules.
  template <typename Result, typename Call>
  Result Run(DiskOp op, Call call);

  mutable Mutex mu_;
  std::array<Rule, static_cast<size_t>(DiskOp::kCount)> rules_ GUARDED_BY(mu_);
  std::array<std::atomic<uint64_t>, static_cast<size_t>(DiskOp::kCount)> calls_{};
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_FAULT_INJECTING_DISK_H_
