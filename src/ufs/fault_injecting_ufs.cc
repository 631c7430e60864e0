#include "ufs/fault_injecting_ufs.h"

namespace cairn::ufs {

std::string_view UfsOpName(UfsOp op) {
  switch (op) {
    case UfsOp::kStat:
      return "stat";
    case UfsOp::kList:
      return "list";
    case UfsOp::kRead:
      return "read";
    case UfsOp::kWrite:
      return "write";
    case UfsOp::kDelete:
      return "delete";
  }
  return "unknown";
}

FaultInjectingUnderStorage::FaultInjectingUnderStorage(std::shared_ptr<UnderStorage> target,
                                                       uint64_t seed, Clock* clock)
    : UnderStorageWrapper(std::move(target)), clock_(clock), rng_(seed) {}

Status FaultInjectingUnderStorage::Before(UfsOp op) {
  int64_t latency = 0;
  Status injected;
  {
    MutexLock lock(&mu_);
    PerOp& p = ops_[static_cast<int>(op)];
    ++p.calls;
    latency = p.spec.latency_us;
    if (p.fail_next > 0) {
      --p.fail_next;
      injected = p.fail_next_status;
    } else if (p.spec.failure_probability > 0.0) {
      // One draw per call of a kind with a probability set keeps the sequence reproducible.
      double draw = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      if (draw < p.spec.failure_probability) injected = p.spec.status;
    }
    if (!injected.ok()) ++p.injected;
  }
  if (latency > 0) clock_->SleepForMicros(latency);
  return injected;
}

StatusOr<ObjectInfo> FaultInjectingUnderStorage::Stat(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kStat));
  return target()->Stat(key);
}

StatusOr<ListResult> FaultInjectingUnderStorage::List(const ListOptions& options) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kList));
  return target()->List(options);
}

StatusOr<size_t> FaultInjectingUnderStorage::Read(std::string_view key,
                                                  std::string_view expected_version,
                                                  uint64_t offset, std::span<char> out) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kRead));
  return target()->Read(key, expected_version, offset, out);
}

class FaultInjectingUnderStorage::Writer : public ObjectWriterWrapper {
 public:
  Writer(std::unique_ptr<ObjectWriter> target, FaultInjectingUnderStorage* owner)
      : ObjectWriterWrapper(std::move(target)), owner_(owner) {}

  Status WritePart(uint32_t index, std::span<const char> data) override {
    CAIRN_RETURN_IF_ERROR(owner_->Before(UfsOp::kWrite));
    return target()->WritePart(index, data);
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    CAIRN_RETURN_IF_ERROR(owner_->Before(UfsOp::kWrite));
    return target()->Commit(size, tail);
  }

 private:
  FaultInjectingUnderStorage* const owner_;
};

StatusOr<std::unique_ptr<ObjectWriter>> FaultInjectingUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, target()->StartWrite(key, options));
  return std::unique_ptr<ObjectWriter>(std::make_unique<Writer>(std::move(writer), this));
}

Status FaultInjectingUnderStorage::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kDelete));
  return target()->Delete(key);
}

void FaultInjectingUnderStorage::SetFault(UfsOp op, FaultSpec spec) {
  MutexLock lock(&mu_);
  ops_[static_cast<int>(op)].spec = std::move(spec);
}

void FaultInjectingUnderStorage::SetFaultAll(const FaultSpec& spec) {
  MutexLock lock(&mu_);
  for (PerOp& p : ops_) p.spec = spec;
}

void FaultInjectingUnderStorage::FailNext(UfsOp op, int n, Status status) {
  MutexLock lock(&mu_);
  PerOp& p = ops_[static_cast<int>(op)];
  p.fail_next = n;
  p.fail_next_status = std::move(status);
}

void FaultInjectingUnderStorage::ClearFaults() {
  MutexLock lock(&mu_);
  for (PerOp& p : ops_) {
    p.spec = FaultSpec();
    p.fail_next = 0;
  }
}

uint64_t FaultInjectingUnderStorage::calls(UfsOp op) const {
  MutexLock lock(&mu_);
  return ops_[static_cast<int>(op)].calls;
}

uint64_t FaultInjectingUnderStorage::total_calls() const {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const PerOp& p : ops_) total += p.calls;
  return total;
}

uint64_t FaultInjectingUnderStorage::injected_failures(UfsOp op) const {
  MutexLock lock(&mu_);
  return ops_[static_cast<int>(op)].injected;
}

void FaultInjectingUnderStorage::ResetCounters() {
  MutexLock lock(&mu_);
  for (PerOp& p : ops_) {
    p.calls = 0;
    p.injected = 0;
  }
}

StatusOr<ObjectInfo> FaultInjectingUnderStorage::Rename(std::string_view from, std::string_view to,
                                                        const RenameOptions& options) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kWrite));
  return target()->Rename(from, to, options);
}

Status FaultInjectingUnderStorage::MakeDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kWrite));
  return target()->MakeDir(key);
}

Status FaultInjectingUnderStorage::RemoveDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(Before(UfsOp::kDelete));
  return target()->RemoveDir(key);
}

}  // namespace cairn::ufs
