#include "cli/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "common/thread_annotations.h"

namespace cairn::cli {

namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

struct Dispatch {
  Mutex mu;
  std::function<void(int)> handler GUARDED_BY(mu);
  bool started GUARDED_BY(mu) = false;
};

Dispatch& TheDispatch() {
  static Dispatch* dispatch = new Dispatch();  // Never destroyed: the thread outlives main.
  return *dispatch;
}

// Ends the process as `sig`'s default action does: unblocked in this thread only, then raised
// at this thread.
[[noreturn]] void DieOf(int sig) {
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
  _exit(128 + sig);  // Not reached.
}

void DispatchLoop() {
  const sigset_t set = TerminationSignals();
  Dispatch& d = TheDispatch();
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    MutexLock l(&d.mu);
    if (!d.handler) DieOf(sig);
    d.handler(sig);
  }
}

}  // namespace

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void StartSignalDispatch() {
  Dispatch& d = TheDispatch();
  MutexLock l(&d.mu);
  if (d.started) return;
  d.started = true;
  std::thread(DispatchLoop).detach();
}

SignalHandler::SignalHandler(std::function<void(int)> on_signal) {
  Dispatch& d = TheDispatch();
  MutexLock l(&d.mu);
  previous_ = std::move(d.handler);
  d.handler = std::move(on_signal);
}

SignalHandler::~SignalHandler() {
  Dispatch& d = TheDispatch();
  MutexLock l(&d.mu);
  d.handler = std::move(previous_);
}

int WaitForTerminationSignal() {
  Mutex mu;
  CondVar got;
  int received = 0;
  SignalHandler handler([&](int sig) {
    MutexLock l(&mu);
    if (received == 0) received = sig;
    got.NotifyAll();
  });
  MutexLock l(&mu);
  got.Wait(&mu, [&]() REQUIRES(mu) { return received != 0; });
  return received;
}

}  // namespace cairn::cli
