// ThreadPool: a fixed set of threads running submitted closures in FIFO order.
// Thread-safety: Submit may be called from any thread, including pool threads. The destructor
// runs every task already queued, then joins.
#ifndef CAIRN_COMMON_THREAD_POOL_H_
#define CAIRN_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"

namespace cairn {

class ThreadPool {
 public:
  explicit ThreadPool(int threads, std::string name = "pool");
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task) EXCLUDES(mu_);
  // Tasks waiting to run (not counting running ones).
  size_t QueueLength() EXCLUDES(mu_);

 private:
  void Loop();
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cairn

#endif  // CAIRN_COMMON_THREAD_POOL_H_
