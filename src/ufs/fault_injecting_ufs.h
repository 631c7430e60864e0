// FaultInjectingUnderStorage: a test decorator that makes the storage it wraps fail, slow down,
// and count calls, reproducibly.
//
// Per operation kind it can: fail with probability p and a chosen Status (drawn from a seeded
// std::mt19937_64, so a given seed and call sequence always fail the same calls), fail the next N
// calls outright, and add latency through the injected Clock (FakeClock in tests: instant). A
// "fail next" budget is consumed before the probability is consulted. Every call is counted,
// whether it failed or not, so tests can assert "no UFS request was made".
//
// Thread-safety: safe for concurrent use. Determinism holds for a single-threaded call sequence;
// with concurrent callers the RNG draws interleave in scheduling order.
#ifndef CAIRN_UFS_FAULT_INJECTING_UFS_H_
#define CAIRN_UFS_FAULT_INJECTING_UFS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "ufs/ufs.h"

namespace cairn::ufs {

enum class UfsOp : int { kStat = 0, kList, kRead, kWrite, kDelete };
inline constexpr int kUfsOpCount = 5;
std::string_view UfsOpName(UfsOp op);

struct FaultSpec {
  double failure_probability = 0.0;                    // In [0, 1].
  Status status = UnavailableError("injected fault");  // Returned by an injected failure.
  int64_t latency_us = 0;  // Added before every call of this kind (failed or not).
};

class FaultInjectingUnderStorage : public UnderStorageWrapper {
 public:
  // `clock` (not owned, must outlive this) is used for added latency.
  FaultInjectingUnderStorage(std::shared_ptr<UnderStorage> target, uint64_t seed,
                             Clock* clock = Clock::Real());

  StatusOr<ObjectInfo> Stat(std::string_view key) override;
  StatusOr<ListResult> List(const ListOptions& options) override;
  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override;
  // kWrite faults apply to each WritePart and Commit of the writers it returns.
  StatusOr<std::unique_ptr<ObjectWriter>> StartWrite(std::string_view key,
                                                     const WriterOptions& options) override;
  Status Delete(std::string_view key) override;
  // Rename and MakeDir take kWrite faults, RemoveDir kDelete faults.
  StatusOr<ObjectInfo> Rename(std::string_view from, std::string_view to,
                              const RenameOptions& options) override;
  Status MakeDir(std::string_view key) override;
  Status RemoveDir(std::string_view key) override;

  // Sets the fault behaviour of one operation kind, or of all of them.
  void SetFault(UfsOp op, FaultSpec spec) EXCLUDES(mu_);
  void SetFaultAll(const FaultSpec& spec) EXCLUDES(mu_);
  // The next `n` calls of kind `op` fail with `status` (in addition to any probability).
  void FailNext(UfsOp op, int n, Status status = UnavailableError("injected fault")) EXCLUDES(mu_);
  // Removes all faults and pending FailNext budgets (counters are kept).
  void ClearFaults() EXCLUDES(mu_);

  // Calls received of kind `op`, failed or not.
  uint64_t calls(UfsOp op) const EXCLUDES(mu_);
  uint64_t total_calls() const EXCLUDES(mu_);
  // Calls of kind `op` that this wrapper failed (not counting failures of the target).
  uint64_t injected_failures(UfsOp op) const EXCLUDES(mu_);
  void ResetCounters() EXCLUDES(mu_);

 private:
  class Writer;

  // Counts the call, sleeps the latency, and returns the injected failure or OK to proceed.
  Status Before(UfsOp op) EXCLUDES(mu_);

  struct PerOp {
    FaultSpec spec;
    int fail_next = 0;
    Status fail_next_status;
    uint64_t calls = 0;
    uint64_t injected = 0;
  };

  Clock* const clock_;
  mutable Mutex mu_;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  std::array<PerOp, kUfsOpCount> ops_ GUARDED_BY(mu_);
};

}  // namespace cairn::ufs

#endif  // CAIRN_UFS_FAULT_INJECTING_UFS_H_
