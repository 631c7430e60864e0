#include "common/fair_pool.h"

#include <pthread.h>

namespace cairn {

FairPool::FairPool(int threads, std::string name) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
    std::string n = (name + "-" + std::to_string(i)).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), n.c_str());
  }
}

FairPool::~FairPool() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void FairPool::Submit(SourceId source, std::function<void()> task) {
  {
    MutexLock l(&mu_);
    auto& queue = queues_[source];
    if (queue.empty()) turns_.push_back(source);
    queue.push_back(std::move(task));
    ++queued_;
  }
  cv_.NotifyOne();
}

size_t FairPool::QueueLength() const {
  MutexLock l(&mu_);
  return queued_;
}

std::function<void()> FairPool::PopNext() {
  SourceId source = turns_.front();
  turns_.pop_front();
  auto it = queues_.find(source);
  std::function<void()> task = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) {
    queues_.erase(it);
  } else {
    turns_.push_back(source);  // Its next task waits for every other source's turn.
  }
  --queued_;
  return task;
}

void FairPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return stopping_ || !turns_.empty(); });
      if (turns_.empty()) return;
      task = PopNext();
    }
    task();
  }
}

}  // namespace cairn
