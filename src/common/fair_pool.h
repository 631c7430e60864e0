// FairPool: a fixed set of threads running the tasks of many sources (one per client
// connection), taking the sources in turn: a source with a long queue gets one task run per
// round, so it cannot make the others wait behind it. Within one source, tasks run in FIFO
// order of submission (but several of one source may run at once on different threads).
//
// The pool does not bound queues itself: each source bounds what it submits (the worker server
// stops reading a connection that has too many requests outstanding), so the total queued is
// at most sources x that bound.
//
// Thread-safety: all methods are thread-safe; Submit may be called from pool threads. The
// destructor runs every task already queued, then joins.
#ifndef CAIRN_COMMON_FAIR_POOL_H_
#define CAIRN_COMMON_FAIR_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"

namespace cairn {

class FairPool {
 public:
  using SourceId = uint64_t;

  FairPool(int threads, std::string name);
  ~FairPool();
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  void Submit(SourceId source, std::function<void()> task) EXCLUDES(mu_);
  // Tasks waiting to run, all sources together (not counting running ones).
  size_t QueueLength() const EXCLUDES(mu_);

 private:
  void Loop();
  // Next task in round-robin order of sources; requires a non-empty queue.
  std::function<void()> PopNext() REQUIRES(mu_);

  mutable Mutex mu_;
  CondVar cv_;
  // Invariant: a source is in `turns_` exactly once iff its queue in `queues_` is non-empty,
  // and `queues_` holds no empty queue.
  std::unordered_map<SourceId, std::deque<std::function<void()>>> queues_ GUARDED_BY(mu_);
  std::deque<SourceId> turns_ GUARDED_BY(mu_);
  size_t queued_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cairn

#endif  // CAIRN_COMMON_FAIR_POOL_H_
