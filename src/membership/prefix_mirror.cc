#include "membership/prefix_mirror.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <utility>

namespace cairn::membership {
namespace {

using Millis = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

Millis AtLeastOneMs(Millis d) { return std::max(d, Millis(1)); }

// Applies one event to `snap`; returns whether it changed anything.
bool Apply(const WatchEvent& e, std::string_view prefix, PrefixMirror::Snapshot* snap) {
  if (e.key.compare(0, prefix.size(), prefix) != 0) return false;  // Not ours (defensive).
  if (e.type == EventType::kDelete) return snap->erase(e.key) > 0;
  auto [it, inserted] = snap->try_emplace(e.key, e.value);
  if (inserted) return true;
  if (it->second == e.value) return false;
  it->second = e.value;
  return true;
}

}  // namespace

std::unique_ptr<PrefixMirror> PrefixMirror::Start(Coordination* coord, std::string prefix,
                                                  Callback on_change, MirrorOptions options) {
  assert(coord != nullptr);
  options.retry_min = AtLeastOneMs(options.retry_min);
  options.retry_max = std::max(options.retry_max, options.retry_min);
  options.probe_interval = AtLeastOneMs(options.probe_interval);
  std::unique_ptr<PrefixMirror> mirror(
      new PrefixMirror(coord, std::move(prefix), std::move(on_change), options));
  mirror->thread_ = std::thread([m = mirror.get()] { m->Run(); });
  return mirror;
}

PrefixMirror::PrefixMirror(Coordination* coord, std::string prefix, Callback on_change,
                           MirrorOptions options)
    : coord_(coord),
      prefix_(std::move(prefix)),
      on_change_(std::move(on_change)),
      options_(options) {}

PrefixMirror::~PrefixMirror() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

bool PrefixMirror::WaitForSync(Millis timeout) {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return synced_; });
}

PrefixMirror::Snapshot PrefixMirror::snapshot() const {
  MutexLock lock(&mu_);
  return snapshot_;
}

bool PrefixMirror::connected() const {
  MutexLock lock(&mu_);
  return connected_;
}

uint64_t PrefixMirror::resyncs() const {
  MutexLock lock(&mu_);
  return resyncs_;
}

bool PrefixMirror::stopping() const {
  MutexLock lock(&mu_);
  return stopping_;
}

bool PrefixMirror::SleepUnlessStopped(Millis d) {
  MutexLock lock(&mu_);
  cv_.WaitFor(&mu_, d, [&]() REQUIRES(mu_) { return stopping_; });
  return !stopping_;
}

void PrefixMirror::SetConnected(bool connected, const Status& why) {
  {
    MutexLock lock(&mu_);
    connected_ = connected;
  }
  if (!connected && !outage_logged_) {
    spdlog::warn("mirror of {}: store unreachable ({}); serving the last known copy and retrying",
                 prefix_, why.ToString());
    outage_logged_ = true;
  } else if (connected && outage_logged_) {
    spdlog::info("mirror of {}: store answers again", prefix_);
    outage_logged_ = false;
  }
}

bool PrefixMirror::Probe() {
  // Any answer, NotFound included, proves the store is reachable; a Get is the cheapest read.
  StatusOr<KeyValue> r = coord_->Get(prefix_);
  const bool answered = r.ok() || r.status().code() == StatusCode::kNotFound;
  SetConnected(answered, r.status());
  return answered;
}

void PrefixMirror::Publish(const Snapshot& snap, bool force) {
  {
    MutexLock lock(&mu_);
    if (!force && snap == snapshot_) return;
    snapshot_ = snap;
  }
  if (on_change_) on_change_(snap);
}

void PrefixMirror::Run() {
  Backoff backoff(options_.retry_min, options_.retry_max);
  bool first = true;
  while (!stopping()) {
    StatusOr<RangeResult> listed = coord_->GetPrefix(prefix_);
    if (!listed.ok()) {
      SetConnected(false, listed.status());
      if (!SleepUnlessStopped(backoff.Next())) return;
      continue;
    }
    SetConnected(true, Status::Ok());
    Snapshot snap;
    for (KeyValue& kv : listed->entries) snap.emplace(std::move(kv.key), std::move(kv.value));
    Publish(snap, /*force=*/first);
    {
      MutexLock lock(&mu_);
      if (!first) ++resyncs_;
      synced_ = true;
    }
    cv_.NotifyAll();
    first = false;

    Status why;
    if (Follow(listed->revision, std::move(snap), &backoff, &why) == FollowEnd::kStopping) return;
    if (why.code() == StatusCode::kUnavailable) {
      SetConnected(false, why);  // Logs once per outage.
    } else {
      spdlog::warn("mirror of {}: watch ended ({}); listing again", prefix_, why.ToString());
    }
    if (!SleepUnlessStopped(backoff.Next())) return;
  }
}

PrefixMirror::FollowEnd PrefixMirror::Follow(int64_t revision, Snapshot snap, Backoff* backoff,
                                             Status* why) {
  StatusOr<std::unique_ptr<WatchHandle>> watch =
      coord_->Watch(prefix_, revision + 1, [this](const WatchUpdate& u) {
        {
          MutexLock lock(&mu_);
          pending_.push_back(u);
        }
        cv_.NotifyAll();
      });
  if (!watch.ok()) {
    *why = watch.status();
    return FollowEnd::kRelist;
  }
  std::unique_ptr<WatchHandle> handle = std::move(watch).value();
  FollowEnd end = FollowEnd::kRelist;
  SteadyClock::time_point next_probe = SteadyClock::now() + options_.probe_interval;
  while (true) {
    std::deque<WatchUpdate> batch;
    bool stop = false;
    {
      MutexLock lock(&mu_);
      const auto remaining =
          std::max(SteadyClock::duration::zero(), next_probe - SteadyClock::now());
      cv_.WaitFor(&mu_, remaining, [&]() REQUIRES(mu_) { return stopping_ || !pending_.empty(); });
      stop = stopping_;
      batch.swap(pending_);
    }
    if (stop) {
      end = FollowEnd::kStopping;
      break;
    }
    bool changed = false;
    bool ended = false;
    for (const WatchUpdate& u : batch) {
      if (!u.status.ok()) {  // Final: nothing more comes from this watch.
        *why = u.status;
        ended = true;
        break;
      }
      for (const WatchEvent& e : u.events) changed |= Apply(e, prefix_, &snap);
      backoff->Reset();
    }
    // Compared again with the published copy: a batch may undo itself (a lease expiry and the
    // worker's re-registration), and that is no change.
    if (changed) Publish(snap, /*force=*/false);
    if (ended) break;
    if (SteadyClock::now() >= next_probe) {
      const bool answered = Probe();
      if (answered) backoff->Reset();
      next_probe = SteadyClock::now() + (answered ? options_.probe_interval : backoff->Next());
    }
  }
  // Outside mu_: the handle's destructor waits for a running callback, which takes mu_.
  handle.reset();
  MutexLock lock(&mu_);
  pending_.clear();
  return end;
}

}  // namespace cairn::membership
