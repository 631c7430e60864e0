// The behavioural contract of Coordination as a parameterized GoogleTest suite, run by
// membership_test against MemoryCoordination and by membership_etcd_test against a real etcd.
// A test binary instantiates it with INSTANTIATE_TEST_SUITE_P(Name, CoordinationBehaviour,
// ::testing::Values(BehaviourParam{...})).
#ifndef CAIRN_MEMBERSHIP_COORDINATION_BEHAVIOUR_H_
#define CAIRN_MEMBERSHIP_COORDINATION_BEHAVIOUR_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "membership/coordination.h"

namespace cairn::membership::testing {

// One store under test, with two clients (the same object where there is no network).
class CoordinationEnv {
 public:
  virtual ~CoordinationEnv() = default;
  virtual Coordination* client() = 0;
  virtual Coordination* other_client() = 0;
  // Lets `d` pass for lease TTLs (advances a fake clock, or sleeps) and lets expiries happen.
  virtual void LetTimePass(std::chrono::milliseconds d) = 0;
};

struct BehaviourParam {
  std::string name;
  std::function<std::unique_ptr<CoordinationEnv>()> make_env;
};

// Collects watch updates; waits for them without fixed sleeps.
class WatchRecorder {
 public:
  WatchCallback Callback();
  // Waits up to `timeout` until >= n events arrived; returns all events so far.
  std::vector<WatchEvent> WaitForEvents(
      size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  std::vector<Status> errors();
  size_t updates();

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<WatchEvent> events_ GUARDED_BY(mu_);
  std::vector<Status> errors_ GUARDED_BY(mu_);
  size_t updates_ GUARDED_BY(mu_) = 0;
};

class CoordinationBehaviour : public ::testing::TestWithParam<BehaviourParam> {
 protected:
  void SetUp() override;
  // A key under this test's own prefix (tests share one etcd).
  std::string Key(const std::string& name) const { return prefix_ + name; }

  std::unique_ptr<CoordinationEnv> env_;
  Coordination* c_ = nullptr;
  Coordination* other_ = nullptr;
  std::string prefix_;
};

}  // namespace cairn::membership::testing

#endif  // CAIRN_MEMBERSHIP_COORDINATION_BEHAVIOUR_H_
