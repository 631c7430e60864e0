// SignalWatcher: turns SIGINT/SIGTERM/SIGHUP into a callback on an ordinary thread.
//
// libfuse's own fuse_set_signal_handlers() only sets the session's exit flag from the handler;
// the loop notices only if the signal happens to interrupt one of its threads blocked in
// read(/dev/fuse). In a process with other threads (client connection pools, metrics) the
// kernel may deliver the signal elsewhere and the mount would keep running. Here the handler
// only writes the signal number into a pipe (async-signal-safe); a watcher thread reads it and
// runs the callback, which can then do the full, thread-safe stop (FuseMount::RequestStop).
//
// Handlers are installed only for signals whose disposition is still SIG_DFL (a caller that
// handles a signal itself keeps it), and restored to SIG_DFL when the watcher is destroyed.
// At most one watcher exists per process at a time.
// Thread-safety: Start and the destructor must not race with each other; the callback runs on
// the watcher thread.
#ifndef CAIRN_FUSE_SIGNAL_WATCHER_H_
#define CAIRN_FUSE_SIGNAL_WATCHER_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/status.h"

namespace cairn::fuse {

class SignalWatcher {
 public:
  // Installs the handlers and starts the watcher thread. FailedPrecondition when another
  // watcher is active in this process; IoError when the pipe or sigaction fails.
  static StatusOr<std::unique_ptr<SignalWatcher>> Start(std::function<void(int)> on_signal);

  // Restores the handlers it installed, then stops and joins the watcher thread (a callback
  // already running completes first).
  ~SignalWatcher();

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Signals whose handler this watcher installed.
  const std::vector<int>& installed() const { return installed_; }

 private:
  SignalWatcher(std::function<void(int)> on_signal, std::vector<int> installed);
  void Loop();

  const std::function<void(int)> on_signal_;
  const std::vector<int> installed_;
  std::thread thread_;
};

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_SIGNAL_WATCHER_H_
