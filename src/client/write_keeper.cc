#include "client/write_keeper.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace cairn::client {

struct WriteKeeper::Kept {
  std::shared_ptr<protocol::PageChannel> channel;
  uint64_t handle = 0;
  int64_t every_us = 0;  // A third of the worker's idle timeout.
  int64_t next_us = 0;   // When the next KeepWrite is due. Guarded by the keeper's mu_.
  uint32_t deadline_ms = 0;
};

WriteKeeper::WriteKeeper(WriteKeeperOptions options) : options_(options) {}

WriteKeeper::~WriteKeeper() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<WriteKeeper::Kept> WriteKeeper::Keep(std::shared_ptr<protocol::PageChannel> channel,
                                                     uint64_t handle,
                                                     std::chrono::milliseconds idle_timeout) {
  if (idle_timeout.count() <= 0 || channel == nullptr) return nullptr;
  auto kept = std::make_shared<Kept>();
  kept->channel = std::move(channel);
  kept->handle = handle;
  // A third: a KeepWrite late by a tick, or lost once, still arrives in time.
  kept->every_us = std::max<int64_t>(1, idle_timeout.count() * 1000 / 3);
  // Its answer is waited for no longer than the next one would be sent.
  kept->deadline_ms = static_cast<uint32_t>(
      std::clamp<int64_t>(kept->every_us / 1000, 1, std::chrono::milliseconds(60'000).count()));
  kept->next_us = options_.clock->NowMicros() + kept->every_us;
  MutexLock l(&mu_);
  kept_.push_back(kept);
  if (options_.run_thread && !thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  return kept;
}

void WriteKeeper::Forget(const std::shared_ptr<Kept>& kept) {
  if (kept == nullptr) return;
  MutexLock l(&mu_);
  std::erase(kept_, kept);
}

size_t WriteKeeper::kept() const {
  MutexLock l(&mu_);
  return kept_.size();
}

size_t WriteKeeper::KeepDue() {
  std::vector<std::shared_ptr<Kept>> due;
  {
    const int64_t now = options_.clock->NowMicros();
    MutexLock l(&mu_);
    for (const auto& k : kept_) {
      if (k->next_us > now) continue;
      k->next_us = now + k->every_us;
      due.push_back(k);
    }
  }
  for (const auto& k : due) {
    protocol::KeepWriteRequest request;
    request.deadline_ms = k->deadline_ms;
    request.handle = k->handle;
    k->channel->CallWrite(request, [handle = k->handle](StatusOr<protocol::WriteReply> reply) {
      // The writer sees a lost handle at its next request and reports it there.
      if (!reply.ok()) {
        spdlog::debug("keeping write handle {:x} alive: {}", handle, reply.status().ToString());
      }
    });
  }
  return due.size();
}

void WriteKeeper::Loop() {
  MutexLock l(&mu_);
  while (!stopping_) {
    // Looks at least four times per shortest period (a worker with a short idle timeout).
    std::chrono::microseconds wait = options_.tick;
    for (const auto& k : kept_) {
      wait = std::min(wait, std::chrono::microseconds(std::max<int64_t>(k->every_us / 4, 1000)));
    }
    wake_.WaitFor(&mu_, std::chrono::duration_cast<std::chrono::milliseconds>(wait),
                  [this]() REQUIRES(mu_) { return stopping_; });
    if (stopping_) break;
    mu_.Unlock();
    KeepDue();
    mu_.Lock();
  }
}

}  // namespace cairn::client
