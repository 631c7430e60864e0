// Termination signals (SIGINT, SIGTERM, SIGHUP) in the cairn binary.
//
// main blocks them in every thread before any starts (BlockTerminationSignals), then starts one
// thread that takes them (StartSignalDispatch). That thread runs the handler a SignalHandler
// installed; when none is installed it ends the process as the signal's default action would
// (killed by the signal: a shell sees 128 + its number). So a one-shot command (put, cat, sync)
// stops on Ctrl-C like any command-line tool, and a long-running one (worker, mount, up, load)
// decides what a signal means: unmount, stop serving, cancel.
//
// Thread-safety: thread-safe. A handler runs on the dispatch thread, with the dispatch lock
// held (a SignalHandler being destroyed waits for it): keep it short, never destroy a
// SignalHandler from inside one.
#ifndef CAIRN_CLI_SIGNALS_H_
#define CAIRN_CLI_SIGNALS_H_

#include <functional>

namespace cairn::cli {

// Call first in main, before any thread starts, so every thread inherits the mask.
void BlockTerminationSignals();
// Starts the dispatch thread (once; later calls do nothing).
void StartSignalDispatch();

// Installs `on_signal` while it lives (it gets the signal's number); the handler it replaced
// (or the default: end the process) comes back when it is destroyed.
class SignalHandler {
 public:
  explicit SignalHandler(std::function<void(int)> on_signal);
  ~SignalHandler();
  SignalHandler(const SignalHandler&) = delete;
  SignalHandler& operator=(const SignalHandler&) = delete;

 private:
  std::function<void(int)> previous_;
};

// Waits for a termination signal (through a SignalHandler installed meanwhile); returns its
// number.
int WaitForTerminationSignal();

}  // namespace cairn::cli

#endif  // CAIRN_CLI_SIGNALS_H_
