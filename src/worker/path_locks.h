// PathLocks: a lock per path, made when a first caller asks for it and dropped when the last
// one lets go. The write service orders the changes of one path with it (a commit, the queue's
// upload, a remove, a rename of either name). Unlike a fixed set of stripes, two paths never
// share a lock: a minutes-long upload of one path (the write-back queue holds the path's lock
// for the whole upload) holds up no other path's commit, rename or remove.
//
// Thread-safety: thread-safe. A Held is released by the thread that took it (a std::mutex),
// when it goes or at Release. Lock order: the table's own mutex is never held while a path's
// lock is waited for; two paths taken together are taken in the order of their names, so two
// callers taking the same pair cannot deadlock (a caller must not take a second Held while it
// has one).
#ifndef CAIRN_WORKER_PATH_LOCKS_H_
#define CAIRN_WORKER_PATH_LOCKS_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"

namespace cairn::worker {

class PathLocks {
 private:
  struct Entry {
    std::mutex mu;
    int users = 0;  // Holders and waiters; guarded by the table's mutex.
  };

 public:
  // The locks of one or two paths, held until this goes or Release.
  class Held {
   public:
    Held() = default;
    Held(Held&& other) noexcept;
    Held& operator=(Held&& other) noexcept;
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() { Release(); }
    void Release();

   private:
    friend class PathLocks;
    PathLocks* table_ = nullptr;
    std::vector<std::pair<std::string, Entry*>> locked_;  // In the order taken.
  };

  PathLocks() = default;
  PathLocks(const PathLocks&) = delete;
  PathLocks& operator=(const PathLocks&) = delete;

  // Waits for the lock of `path` and holds it.
  [[nodiscard]] Held Lock(const std::string& path) EXCLUDES(mu_);
  // The locks of `a` and `b` (one lock when they are the same path), in name order.
  [[nodiscard]] Held Lock(const std::string& a, const std::string& b) EXCLUDES(mu_);
  // Paths with a lock held or waited for (tests: the table does not grow with every path).
  size_t size() const EXCLUDES(mu_);

 private:
  // Counts the caller in, then waits for the path's lock (the table's mutex not held).
  Entry* Acquire(const std::string& path) EXCLUDES(mu_);
  void Drop(const std::string& path, Entry* entry) EXCLUDES(mu_);

  mutable Mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries_ GUARDED_BY(mu_);
};

}  // namespace cairn::worker

#endif  // CAIRN_WORKER_PATH_LOCKS_H_
