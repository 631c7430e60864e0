#include "ufs/retrying_ufs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace cairn::ufs {

bool IsRetryable(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kDeadlineExceeded;
}

RetryingUnderStorage::RetryingUnderStorage(std::shared_ptr<UnderStorage> target,
                                           RetryOptions options, Clock* clock)
    : UnderStorageWrapper(std::move(target)),
      options_(options),
      clock_(clock),
      rng_(options.seed != 0 ? options.seed : std::random_device{}()) {}

int64_t RetryingUnderStorage::NextBackoffMicros(int retry) {
  int64_t cap = options_.base_backoff_us;
  for (int i = 0; i < retry && cap < options_.max_backoff_us; ++i) cap *= 2;
  cap = std::min(cap, options_.max_backoff_us);
  if (cap <= 0) return 0;
  MutexLock lock(&mu_);
  return std::uniform_int_distribution<int64_t>(0, cap)(rng_);
}

Status RetryingUnderStorage::Run(const std::function<Status()>& attempt) {
  const int64_t start = clock_->NowMicros();
  int attempts = 0;
  while (true) {
    Status status = attempt();
    ++attempts;
    if (status.ok() || !IsRetryable(status)) return status;
    int retry = attempts - 1;
    if (retry >= options_.max_retries) {
      return status.WithContext("giving up after " + std::to_string(attempts) + " attempt(s)");
    }
    int64_t sleep = NextBackoffMicros(retry);
    int64_t elapsed = clock_->NowMicros() - start;
    if (elapsed + sleep > options_.max_elapsed_us) {
      return status.WithContext("giving up after " + std::to_string(attempts) + " attempt(s) and " +
                                std::to_string(elapsed / 1000) + " ms");
    }
    spdlog::debug("ufs: {} on {}; retry {} of {} in {} ms", status.ToString(), RootUri(), retry + 1,
                  options_.max_retries, sleep / 1000);
    retries_.fetch_add(1, std::memory_order_relaxed);
    clock_->SleepForMicros(sleep);
  }
}

StatusOr<ObjectInfo> RetryingUnderStorage::Stat(std::string_view key) {
  std::optional<ObjectInfo> info;
  Status st = Run([&]() -> Status {
    StatusOr<ObjectInfo> r = target()->Stat(key);
    if (!r.ok()) return r.status();
    info = std::move(r).value();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return std::move(*info);
}

StatusOr<ListResult> RetryingUnderStorage::List(const ListOptions& options) {
  std::optional<ListResult> result;
  Status st = Run([&]() -> Status {
    StatusOr<ListResult> r = target()->List(options);
    if (!r.ok()) return r.status();
    result = std::move(r).value();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return std::move(*result);
}

StatusOr<size_t> RetryingUnderStorage::Read(std::string_view key, std::string_view expected_version,
                                            uint64_t offset, std::span<char> out) {
  size_t n = 0;
  Status st = Run([&]() -> Status {
    StatusOr<size_t> r = target()->Read(key, expected_version, offset, out);
    if (!r.ok()) return r.status();
    n = *r;
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return n;
}

class RetryingUnderStorage::Writer : public ObjectWriterWrapper {
 public:
  Writer(std::unique_ptr<ObjectWriter> target, RetryingUnderStorage* owner)
      : ObjectWriterWrapper(std::move(target)), owner_(owner) {}

  Status WritePart(uint32_t index, std::span<const char> data) override {
    return owner_->Run([&]() { return target()->WritePart(index, data); });
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    std::optional<ObjectInfo> info;
    bool may_have_landed = false;
    Status st = owner_->Run([&]() -> Status {
      StatusOr<ObjectInfo> r = target()->Commit(size, tail);
      if (!r.ok()) {
        may_have_landed = may_have_landed || r.status().outcome_unknown();
        return r.status();
      }
      info = std::move(r).value();
      return Status::Ok();
    });
    // An earlier attempt that may have landed still may have when a later one never got out.
    if (!st.ok()) return may_have_landed ? st.WithOutcomeUnknown() : st;
    return std::move(*info);
  }

  Status Abort() override {
    return owner_->Run([&]() { return target()->Abort(); });
  }

 private:
  RetryingUnderStorage* const owner_;
};

StatusOr<std::unique_ptr<ObjectWriter>> RetryingUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, target()->StartWrite(key, options));
  return std::unique_ptr<ObjectWriter>(std::make_unique<Writer>(std::move(writer), this));
}

Status RetryingUnderStorage::Delete(std::string_view key) {
  bool had_transient_failure = false;
  return Run([&]() -> Status {
    Status st = target()->Delete(key);
    if (st.code() == StatusCode::kNotFound && had_transient_failure) return Status::Ok();
    if (IsRetryable(st)) had_transient_failure = true;
    return st;
  });
}

StatusOr<ObjectInfo> RetryingUnderStorage::Rename(std::string_view from, std::string_view to,
                                                  const RenameOptions& options) {
  bool had_transient_failure = false;
  StatusOr<ObjectInfo> result = InternalError("rename not attempted");
  Status st = Run([&]() -> Status {
    result = target()->Rename(from, to, options);
    if (result.status().code() == StatusCode::kNotFound && had_transient_failure) {
      result = target()->Stat(to);  // The lost attempt most likely moved it.
      if (result.ok()) return Status::Ok();
      result = NotFoundError("no such object '" + std::string(from) + "'");
    }
    if (IsRetryable(result.status())) had_transient_failure = true;
    return result.status();
  });
  if (!st.ok()) return st;
  return result;
}

Status RetryingUnderStorage::MakeDir(std::string_view key) {
  bool had_transient_failure = false;
  return Run([&]() -> Status {
    Status st = target()->MakeDir(key);
    if (st.code() == StatusCode::kAlreadyExists && had_transient_failure) return Status::Ok();
    if (IsRetryable(st)) had_transient_failure = true;
    return st;
  });
}

Status RetryingUnderStorage::RemoveDir(std::string_view key) {
  bool had_transient_failure = false;
  return Run([&]() -> Status {
    Status st = target()->RemoveDir(key);
    if (st.code() == StatusCode::kNotFound && had_transient_failure) return Status::Ok();
    if (IsRetryable(st)) had_transient_failure = true;
    return st;
  });
}

}  // namespace cairn::ufs
