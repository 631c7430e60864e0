#include "fuse/signal_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <utility>

namespace cairn::fuse {
namespace {

// One pipe for the life of the process: a handler running on another thread while a watcher
// shuts down can never write into a closed (and possibly reused) descriptor.
int g_pipe[2] = {-1, -1};
std::atomic<bool> g_active{false};
constexpr unsigned char kQuit = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_pipe[1] >= 0) (void)!::write(g_pipe[1], &byte, 1);
  errno = saved;
}

Status EnsurePipe() {
  static std::once_flag once;
  static int error = 0;
  std::call_once(once, [] {
    if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) error = errno;
  });
  return error == 0 ? Status::Ok() : ErrnoToStatus(error, "creating the signal pipe");
}

void Drain() {
  unsigned char buf[64];
  while (::read(g_pipe[0], buf, sizeof(buf)) > 0) {
  }
}

}  // namespace

StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Start(std::function<void(int)> on_signal) {
  CAIRN_RETURN_IF_ERROR(EnsurePipe());
  if (g_active.exchange(true)) {
    return FailedPreconditionError("another signal watcher is active in this process");
  }
  Drain();  // Leftovers of signals that arrived after a previous watcher stopped.
  std::vector<int> installed;
  for (int sig : kSignals) {
    struct sigaction old_action;
    if (::sigaction(sig, nullptr, &old_action) != 0) continue;
    if ((old_action.sa_flags & SA_SIGINFO) != 0 || old_action.sa_handler != SIG_DFL) continue;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = &OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // Do not surprise other threads' syscalls with EINTR.
    if (::sigaction(sig, &action, nullptr) == 0) installed.push_back(sig);
  }
  std::unique_ptr<SignalWatcher> watcher(new SignalWatcher(std::move(on_signal), installed));
  watcher->thread_ = std::thread([w = watcher.get()] { w->Loop(); });
  return watcher;
}

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal, std::vector<int> installed)
    : on_signal_(std::move(on_signal)), installed_(std::move(installed)) {}

SignalWatcher::~SignalWatcher() {
  for (int sig : installed_) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
  const unsigned char quit = kQuit;
  while (::write(g_pipe[1], &quit, 1) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
  g_active.store(false);
}

void SignalWatcher::Loop() {
  while (true) {
    struct pollfd pfd = {.fd = g_pipe[0], .events = POLLIN, .revents = 0};
    if (::poll(&pfd, 1, -1) < 0 && errno != EINTR) return;
    unsigned char buf[64];
    ssize_t n;
    while ((n = ::read(g_pipe[0], buf, sizeof(buf))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] == kQuit) return;
        on_signal_(buf[i]);
      }
    }
  }
}

}  // namespace cairn::fuse
