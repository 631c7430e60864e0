#include "testing/fault_injecting_disk.h"

namespace cairn::testing {

void FaultInjectingDisk::FailNext(DiskOp op, Status error, int times) {
  MutexLock l(&mu_);
  rules_[Index(op)].error = std::move(error);
  rules_[Index(op)].fail_left = times;
}

void FaultInjectingDisk::Clear(DiskOp op) {
  MutexLock l(&mu_);
  rules_[Index(op)].fail_left = 0;
  rules_[Index(op)].gate.reset();
}

void FaultInjectingDisk::Hold(DiskOp op, std::shared_ptr<Gate> gate, When when, int after,
                              int count) {
  MutexLock l(&mu_);
  Rule& rule = rules_[Index(op)];
  rule.gate = std::move(gate);
  rule.when = when;
  rule.hold_from = static_cast<int>(calls_[Index(op)].load()) + after;
  rule.hold_until = count < 0 ? -1 : rule.hold_from + count;
}

Status FaultInjectingDisk::Enter(DiskOp op, std::shared_ptr<Gate>* before,
                                 std::shared_ptr<Gate>* after) {
  const int n = static_cast<int>(calls_[Index(op)].fetch_add(1));
  MutexLock l(&mu_);
  Rule& rule = rules_[Index(op)];
  if (rule.gate != nullptr && n >= rule.hold_from && (rule.hold_until < 0 || n < rule.hold_until)) {
    (rule.when == When::kBefore ? *before : *after) = rule.gate;
  }
  if (rule.fail_left == 0) return Status::Ok();
  if (rule.fail_left > 0) --rule.fail_left;
  return rule.error;
}

template <typename Result, typename Call>
Result FaultInjectingDisk::Run(DiskOp op, Call call) {
  std::shared_ptr<Gate> before, after;
  Status injected = Enter(op, &before, &after);
  if (before != nullptr) before->Pass();
  if (!injected.ok()) return injected;
  Result result = call();
  if (after != nullptr) after->Pass();
  return result;
}

StatusOr<pagestore::FileInfo> FaultInjectingDisk::Stat(const std::string& path) {
  return Run<StatusOr<pagestore::FileInfo>>(DiskOp::kStat, [&] { return DiskWrapper::Stat(path); });
}

StatusOr<std::unique_ptr<pagestore::RandomAccessFile>> FaultInjectingDisk::OpenForRead(
    const std::string& path) {
  return Run<StatusOr<std::unique_ptr<pagestore::RandomAccessFile>>>(
      DiskOp::kOpenForRead, [&] { return DiskWrapper::OpenForRead(path); });
}

Status FaultInjectingDisk::WriteNewFile(const std::string& path,
                                        std::span<const std::span<const char>> pieces) {
  return Run<Status>(DiskOp::kWriteNewFile,
                     [&] { return DiskWrapper::WriteNewFile(path, pieces); });
}

Status FaultInjectingDisk::Rename(const std::string& from, const std::string& to) {
  return Run<Status>(DiskOp::kRename, [&] { return DiskWrapper::Rename(from, to); });
}

Status FaultInjectingDisk::Unlink(const std::string& path) {
  return Run<Status>(DiskOp::kUnlink, [&] { return DiskWrapper::Unlink(path); });
}

StatusOr<std::vector<pagestore::DirEntry>> FaultInjectingDisk::ListDir(const std::string& path) {
  return Run<StatusOr<std::vector<pagestore::DirEntry>>>(
      DiskOp::kListDir, [&] { return DiskWrapper::ListDir(path); });
}

}  // namespace cairn::testing
