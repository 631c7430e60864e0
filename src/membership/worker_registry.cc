#include "membership/worker_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "membership/backoff.h"

namespace cairn::membership {
namespace {

using Millis = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

}  // namespace

StatusOr<std::unique_ptr<WorkerRegistry>> WorkerRegistry::Start(Coordination* coord,
                                                                WorkerRecord record,
                                                                WorkerRegistryOptions options) {
  if (coord == nullptr) return InvalidArgumentError("worker registry: no coordination store");
  CAIRN_RETURN_IF_ERROR(ValidateWorkerRecord(record));
  if (options.ttl < std::chrono::seconds(1)) {
    return InvalidArgumentError("worker registry: ttl must be at least 1 s");
  }
  if (options.retry_min <= Millis(0) || options.retry_max < options.retry_min ||
      options.stop_timeout < Millis(0)) {
    return InvalidArgumentError(
        "worker registry: need 0 < retry_min <= retry_max and stop_timeout >= 0");
  }
  std::unique_ptr<WorkerRegistry> registry(new WorkerRegistry(coord, std::move(record), options));
  registry->thread_ = std::thread([r = registry.get()] { r->Run(); });
  return registry;
}

WorkerRegistry::WorkerRegistry(Coordination* coord, WorkerRecord record,
                               WorkerRegistryOptions options)
    : coord_(coord),
      record_(std::move(record)),
      key_(WorkerKey(record_.id)),
      value_(EncodeWorkerRecord(record_)),
      options_(options) {}

WorkerRegistry::~WorkerRegistry() { Stop(); }

void WorkerRegistry::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    registered_ = false;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  RevokeAfterStop();
  stopped_ = true;
}

bool WorkerRegistry::WaitRegistered(Millis timeout) {
  {
    MutexLock lock(&mu_);
    cv_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return registered_ || stopping_; });
  }
  return registered();
}

bool WorkerRegistry::registered() const {
  MutexLock lock(&mu_);
  return registered_ && !stopping_ && SteadyClock::now() - confirmed_at_ < options_.ttl;
}

uint64_t WorkerRegistry::registrations() const {
  MutexLock lock(&mu_);
  return registrations_;
}

uint64_t WorkerRegistry::keepalive_failures() const {
  MutexLock lock(&mu_);
  return keepalive_failures_;
}

bool WorkerRegistry::stopping() const {
  MutexLock lock(&mu_);
  return stopping_;
}

bool WorkerRegistry::SleepUnlessStopped(Millis d) {
  MutexLock lock(&mu_);
  cv_.WaitFor(&mu_, d, [&]() REQUIRES(mu_) { return stopping_; });
  return !stopping_;
}

void WorkerRegistry::Run() {
  Backoff backoff(options_.retry_min, options_.retry_max);
  const Millis keepalive_every =
      std::max(Millis(1), std::chrono::duration_cast<Millis>(options_.ttl) / 3);
  bool outage = false;
  int lost_in_a_row = 0;
  while (!stopping()) {
    const bool registering = !key_written_;
    const Status st = registering ? RegisterOnce() : KeepAliveOnce();
    Millis wait;
    if (st.ok()) {
      if (outage) {
        spdlog::info("worker {}: etcd answers again after {} failed attempts", record_.id,
                     backoff.attempts());
        outage = false;
      }
      backoff.Reset();
      lost_in_a_row = 0;
      wait = keepalive_every;
    } else if (st.code() == StatusCode::kNotFound) {
      // The lease is gone (the worker stalled past its TTL, or it was revoked) and its key went
      // with it: register again under a new lease. Immediately the first time; with backoff if
      // the store keeps refusing, so a confused store cannot make this loop spin.
      spdlog::warn("worker {}: lease {} lost ({}); registering again", record_.id, lease_id_,
                   st.ToString());
      lease_id_ = 0;
      key_written_ = false;
      {
        MutexLock lock(&mu_);
        registered_ = false;
      }
      wait = lost_in_a_row++ == 0 ? Millis(0) : backoff.Next();
    } else {
      if (!outage) {
        spdlog::warn("worker {}: {} failed: {}; retrying with backoff until etcd answers",
                     record_.id, registering ? "registration" : "lease keep-alive", st.ToString());
        outage = true;
      }
      wait = backoff.Next();
      bool lease_may_live = false;
      {
        MutexLock lock(&mu_);
        lease_may_live = registered_ && SteadyClock::now() - confirmed_at_ < options_.ttl;
      }
      // A short blip must not cost the lease: keep trying at the keep-alive pace until it has
      // surely expired.
      if (lease_may_live) wait = std::min(wait, keepalive_every);
    }
    if (!SleepUnlessStopped(wait)) break;
  }
}

Status WorkerRegistry::RegisterOnce() {
  if (lease_id_ == 0) {
    CAIRN_ASSIGN_OR_RETURN(lease_id_, coord_->GrantLease(options_.ttl));
  }
  // A Put that came back Unavailable may have happened; putting the same value again under the
  // same lease is harmless.
  StatusOr<int64_t> put = coord_->Put(key_, value_, lease_id_);
  if (!put.ok()) return put.status();
  key_written_ = true;
  uint64_t n = 0;
  {
    MutexLock lock(&mu_);
    registered_ = true;
    confirmed_at_ = SteadyClock::now();
    n = ++registrations_;
  }
  cv_.NotifyAll();
  spdlog::info("worker {}: registered at {} (lease {}, registration #{})", record_.id, key_,
               lease_id_, n);
  return Status::Ok();
}

Status WorkerRegistry::KeepAliveOnce() {
  const Status st = coord_->KeepAlive(lease_id_);
  MutexLock lock(&mu_);
  if (st.ok()) {
    confirmed_at_ = SteadyClock::now();
  } else {
    ++keepalive_failures_;
    if (st.code() == StatusCode::kNotFound) registered_ = false;
  }
  return st;
}

void WorkerRegistry::RevokeAfterStop() {
  if (lease_id_ == 0) return;
  const SteadyClock::time_point deadline = SteadyClock::now() + options_.stop_timeout;
  Backoff backoff(Millis(50), Millis(500));
  while (true) {
    const Status st = coord_->RevokeLease(lease_id_);
    if (st.ok() || st.code() == StatusCode::kNotFound) {
      spdlog::info("worker {}: deregistered (lease {} revoked)", record_.id, lease_id_);
      lease_id_ = 0;
      return;
    }
    const Millis d = backoff.Next();
    if (SteadyClock::now() + d >= deadline) {
      spdlog::warn("worker {}: could not revoke lease {} ({}); {} expires within {} s", record_.id,
                   lease_id_, st.ToString(), key_, options_.ttl.count());
      return;
    }
    // Stopping: nothing can interrupt this wait, and it is bounded by the deadline.
    std::this_thread::sleep_for(d);
  }
}

}  // namespace cairn::membership
