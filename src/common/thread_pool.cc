#include "common/thread_pool.h"

#include <pthread.h>

namespace cairn {

ThreadPool::ThreadPool(int threads, std::string name) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
    std::string n = (name + "-" + std::to_string(i)).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), n.c_str());
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    MutexLock l(&mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.NotifyOne();
}

size_t ThreadPool::QueueLength() {
  MutexLock l(&mu_);
  return tasks_.size();
}

void ThreadPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace cairn
