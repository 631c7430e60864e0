// Clang thread-safety annotations (no-ops on other compilers) and an annotated Mutex.
// Build with clang (-Wthread-safety is on for clang builds) to have lock discipline checked.
#ifndef CAIRN_COMMON_THREAD_ANNOTATIONS_H_
#define CAIRN_COMMON_THREAD_ANNOTATIONS_H_

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define CAIRN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CAIRN_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) CAIRN_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY CAIRN_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) CAIRN_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) CAIRN_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRE(...) CAIRN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) CAIRN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define REQUIRES(...) CAIRN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) CAIRN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS CAIRN_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace cairn {

// std::mutex with capability annotations.
class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // For std::condition_variable_any / std::unique_lock interop.
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// Condition variable usable with Mutex (waits must hold the mutex).
class CondVar {
 public:
  template <typename Pred>
  void Wait(Mutex* mu, Pred pred) REQUIRES(mu) {
    cv_.wait(*mu, pred);
  }
  // Returns pred() at the end (false on timeout with pred still false).
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> d, Pred pred) REQUIRES(mu) {
    return cv_.wait_for(*mu, d, pred);
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace cairn

#endif  // CAIRN_COMMON_THREAD_ANNOTATIONS_H_
