#include "worker/peer_pending.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <utility>

namespace cairn::worker {
namespace {

// The answers of one question, filled by the channels' callbacks (which may outlive the
// question when a peer answers after the timeout).
struct Answers {
  Mutex mu;
  CondVar done;
  size_t outstanding GUARDED_BY(mu) = 0;
  std::vector<protocol::DirEntry> entries GUARDED_BY(mu);
  std::vector<std::string> failed GUARDED_BY(mu);
  std::vector<std::string> answered GUARDED_BY(mu);
};

}  // namespace

std::vector<protocol::DirEntry> PeerPending::ChildrenUnder(const std::string& dir) {
  const int64_t now = clock_->NowMicros();
  std::vector<std::string> ask;
  {
    MutexLock l(&mu_);
    for (std::string& id : peers_->PeerIds()) {
      auto quiet = quiet_until_us_.find(id);
      if (quiet != quiet_until_us_.end() && quiet->second > now) {
        ++failures_;
        if (failures_metric_ != nullptr) failures_metric_->Increment();
        continue;
      }
      ask.push_back(std::move(id));
    }
  }
  if (ask.empty()) return {};
  auto answers = std::make_shared<Answers>();
  protocol::ListPendingRequest request;
  request.deadline_ms = static_cast<uint32_t>(timeout_.count());
  request.path = dir;
  std::vector<std::string> asked;
  for (const std::string& id : ask) {
    std::shared_ptr<protocol::PageChannel> channel = peers_->Get(id);
    if (channel == nullptr) continue;  // Left the cluster since PeerIds.
    asked.push_back(id);
    {
      MutexLock l(&answers->mu);
      ++answers->outstanding;
    }
    channel->CallMetadata(request, [answers, id](StatusOr<protocol::MetadataReply> reply) {
      MutexLock l(&answers->mu);
      if (reply.ok() && reply->status == StatusCode::kOk) {
        for (protocol::DirEntry& e : reply->entries) answers->entries.push_back(std::move(e));
        answers->answered.push_back(id);
      } else {
        spdlog::debug("pending files of {}: {}", id,
                      reply.ok() ? reply->error_message : reply.status().ToString());
        answers->failed.push_back(id);
      }
      --answers->outstanding;
      answers->done.NotifyAll();
    });
  }
  std::vector<protocol::DirEntry> entries;
  std::vector<std::string> answered;
  {
    MutexLock l(&answers->mu);
    // The channel's own deadline ends each call; the margin covers a callback running late.
    answers->done.WaitFor(&answers->mu, timeout_ + std::chrono::milliseconds(100),
                          [&]() REQUIRES(answers->mu) { return answers->outstanding == 0; });
    entries = std::move(answers->entries);
    answers->entries.clear();
    answered = answers->answered;
  }
  // Every peer asked that did not answer (it failed, or is still silent) is left alone for a
  // while.
  const int64_t quiet_until =
      clock_->NowMicros() +
      std::chrono::duration_cast<std::chrono::microseconds>(kQuietAfterFailure).count();
  MutexLock l(&mu_);
  for (const std::string& id : asked) {
    if (std::find(answered.begin(), answered.end(), id) != answered.end()) {
      quiet_until_us_.erase(id);
      continue;
    }
    ++failures_;
    if (failures_metric_ != nullptr) failures_metric_->Increment();
    quiet_until_us_[id] = quiet_until;
  }
  return entries;
}

uint64_t PeerPending::failures() const {
  MutexLock l(&mu_);
  return failures_;
}

}  // namespace cairn::worker
