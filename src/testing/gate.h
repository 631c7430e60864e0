// Gate: holds the threads that reach it until the test opens it, so a test can freeze an
// operation at a chosen point (a source read, a disk write) and act while it is held.
//
// Thread-safety: all methods are thread-safe. A gate starts closed; once opened it stays open.
#ifndef CAIRN_TESTING_GATE_H_
#define CAIRN_TESTING_GATE_H_

#include <chrono>
#include <cstddef>

#include "common/thread_annotations.h"

namespace cairn::testing {

class Gate {
 public:
  // Blocks the caller until Open() (returns at once on an open gate). Counts the arrival.
  void Pass() EXCLUDES(mu_);
  // Lets every held and future caller through.
  void Open() EXCLUDES(mu_);
  // Waits until at least `n` callers have reached the gate; false if `timeout` passed first.
  [[nodiscard]] bool WaitForArrivals(size_t n,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10))
      EXCLUDES(mu_);
  size_t arrivals() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  CondVar cv_;
  bool open_ GUARDED_BY(mu_) = false;
  size_t arrivals_ GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_GATE_H_
