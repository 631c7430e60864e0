#include "ufs/throttled_ufs.h"

#include <algorithm>
#include <utility>

#include "ufs/retrying_ufs.h"

namespace cairn::ufs {
namespace {

std::vector<std::shared_ptr<UfsLimiter>> InAcquisitionOrder(
    std::vector<std::shared_ptr<UfsLimiter>> limiters) {
  std::erase(limiters, nullptr);
  // A limiter listed twice would wait for a second slot of its own; a cap of 1 would deadlock.
  std::sort(limiters.begin(), limiters.end(),
            [](const auto& a, const auto& b) { return a->sequence() > b->sequence(); });
  limiters.erase(std::unique(limiters.begin(), limiters.end()), limiters.end());
  return limiters;
}

}  // namespace

bool IsThrottled(const Status& status) {
  if (status.code() != StatusCode::kUnavailable) return false;
  const std::string& m = status.message();
  return m.find("SlowDown") != std::string::npos || m.find("HTTP 503") != std::string::npos ||
         m.find("HTTP 429") != std::string::npos;
}

ThrottledUnderStorage::ThrottledUnderStorage(std::shared_ptr<UnderStorage> target,
                                             std::vector<std::shared_ptr<UfsLimiter>> limiters,
                                             std::chrono::milliseconds max_wait)
    : UnderStorageWrapper(std::move(target)),
      limiters_(InAcquisitionOrder(std::move(limiters))),
      max_wait_(max_wait) {}

StatusOr<std::vector<UfsLimiter::Permit>> ThrottledUnderStorage::AcquireAll(uint64_t bytes) {
  std::vector<UfsLimiter::Permit> permits;
  permits.reserve(limiters_.size());
  if (limiters_.empty()) return permits;
  Clock* clock = limiters_.front()->clock();
  const int64_t start = clock->NowMicros();
  for (const auto& limiter : limiters_) {
    // The budget is for the whole call: later limiters get what the earlier ones left.
    const int64_t spent_ms = (clock->NowMicros() - start) / 1000;
    const auto left =
        std::max(std::chrono::milliseconds(0), max_wait_ - std::chrono::milliseconds(spent_ms));
    StatusOr<UfsLimiter::Permit> permit = limiter->Acquire(bytes, left);
    if (!permit.ok()) return permit.status();  // `permits` releases the ones already taken.
    permits.push_back(std::move(permit).value());
  }
  return permits;
}

void ThrottledUnderStorage::Report(const Status& status) {
  if (IsThrottled(status)) {
    for (const auto& limiter : limiters_) limiter->OnThrottled();
  } else if (status.ok() || !IsRetryable(status)) {
    // NotFound, FailedPrecondition, ... are answers: the source took the request in stride.
    for (const auto& limiter : limiters_) limiter->OnSuccess();
  }
}

StatusOr<ObjectInfo> ThrottledUnderStorage::Stat(std::string_view key) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(0));
  StatusOr<ObjectInfo> result = target()->Stat(key);
  Report(result.status());
  return result;
}

StatusOr<ListResult> ThrottledUnderStorage::List(const ListOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(0));
  StatusOr<ListResult> result = target()->List(options);
  Report(result.status());
  return result;
}

StatusOr<size_t> ThrottledUnderStorage::Read(std::string_view key,
                                             std::string_view expected_version, uint64_t offset,
                                             std::span<char> out) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(out.size()));
  StatusOr<size_t> result = target()->Read(key, expected_version, offset, out);
  Report(result.status());
  // A short read (end of object) did not use the link for the rest. A failed one is not
  // refunded: how much crossed the link before it failed is unknown, so err on the safe side.
  if (result.ok() && *result < out.size()) {
    for (auto& permit : permits) permit.Refund(out.size() - *result);
  }
  return result;
}

class ThrottledUnderStorage::Writer : public ObjectWriterWrapper {
 public:
  Writer(std::unique_ptr<ObjectWriter> target, ThrottledUnderStorage* owner)
      : ObjectWriterWrapper(std::move(target)), owner_(owner) {}

  Status WritePart(uint32_t index, std::span<const char> data) override {
    CAIRN_ASSIGN_OR_RETURN(auto permits, owner_->AcquireAll(data.size()));
    Status status = target()->WritePart(index, data);
    owner_->Report(status);
    return status;
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    CAIRN_ASSIGN_OR_RETURN(auto permits, owner_->AcquireAll(tail.size()));
    StatusOr<ObjectInfo> result = target()->Commit(size, tail);
    owner_->Report(result.status());
    return result;
  }

  Status Abort() override {
    CAIRN_ASSIGN_OR_RETURN(auto permits, owner_->AcquireAll(0));
    Status status = target()->Abort();
    owner_->Report(status);
    return status;
  }

 private:
  ThrottledUnderStorage* const owner_;
};

StatusOr<std::unique_ptr<ObjectWriter>> ThrottledUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, target()->StartWrite(key, options));
  return std::unique_ptr<ObjectWriter>(std::make_unique<Writer>(std::move(writer), this));
}

Status ThrottledUnderStorage::Delete(std::string_view key) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(0));
  Status status = target()->Delete(key);
  Report(status);
  return status;
}

// A server-side copy moves no bytes through this process: like Delete, a request of 0 bytes.
StatusOr<ObjectInfo> ThrottledUnderStorage::Rename(std::string_view from, std::string_view to,
                                                   const RenameOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(0));
  StatusOr<ObjectInfo> result = target()->Rename(from, to, options);
  Report(result.status());
  return result;
}

Status ThrottledUnderStorage::MakeDir(std::string_view key) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(0));
  Status status = target()->MakeDir(key);
  Report(status);
  return status;
}

Status ThrottledUnderStorage::RemoveDir(std::string_view key) {
  CAIRN_ASSIGN_OR_RETURN(auto permits, AcquireAll(0));
  Status status = target()->RemoveDir(key);
  Report(status);
  return status;
}

}  // namespace cairn::ufs
