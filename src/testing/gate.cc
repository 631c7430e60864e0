#include "testing/gate.h"

namespace cairn::testing {

void Gate::Pass() {
  MutexLock l(&mu_);
  ++arrivals_;
  cv_.NotifyAll();
  cv_.Wait(&mu_, [this]() REQUIRES(mu_) { return open_; });
}

void Gate::Open() {
  {
    MutexLock l(&mu_);
    open_ = true;
  }
  cv_.NotifyAll();
}

bool Gate::WaitForArrivals(size_t n, std::chrono::milliseconds timeout) {
  MutexLock l(&mu_);
  return cv_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return arrivals_ >= n; });
}

size_t Gate::arrivals() const {
  MutexLock l(&mu_);
  return arrivals_;
}

}  // namespace cairn::testing
