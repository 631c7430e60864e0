#include "fuse/fuse_mount.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "fuse/filesystem.h"
#include "fuse/readahead.h"
#include "fuse/signal_watcher.h"

namespace cairn::fuse {
namespace {

// libfuse reports through fuse_log(); route it into our log, and let Mount() collect the error
// lines of its own thread so that a failed mount can say why.
thread_local std::string* t_log_capture = nullptr;
std::atomic<bool> g_fuse_debug{false};

void FuseLogBridge(enum fuse_log_level level, const char* fmt, va_list ap) {
  char line[1024];
  std::vsnprintf(line, sizeof(line), fmt, ap);
  size_t len = std::strlen(line);
  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
  if (level <= FUSE_LOG_ERR && t_log_capture != nullptr) {
    if (!t_log_capture->empty()) *t_log_capture += "; ";
    *t_log_capture += line;
  }
  if (level <= FUSE_LOG_ERR) {
    spdlog::error("libfuse: {}", line);
  } else if (level == FUSE_LOG_WARNING) {
    spdlog::warn("libfuse: {}", line);
  } else if (level < FUSE_LOG_DEBUG || g_fuse_debug.load()) {
    spdlog::info("libfuse: {}", line);
  } else {
    spdlog::debug("libfuse: {}", line);
  }
}

void InstallFuseLogBridge() {
  static std::once_flag once;
  std::call_once(once, [] { fuse_set_log_func(&FuseLogBridge); });
}

// Collects libfuse error lines logged by this thread while alive.
class LogCapture {
 public:
  LogCapture() { t_log_capture = &text_; }
  ~LogCapture() { t_log_capture = nullptr; }
  std::string Reason(std::string_view fallback) const {
    return text_.empty() ? std::string(fallback) : text_;
  }

 private:
  std::string text_;
};

bool ValidTimeout(double seconds) { return std::isfinite(seconds) && seconds >= 0; }

Status ValidateOptions(Client* client, const FuseOptions& options) {
  if (client == nullptr) return InvalidArgumentError("FUSE mount needs a client");
  if (options.mountpoint.empty()) return InvalidArgumentError("FUSE mount point is empty");
  if (options.max_threads < 1 || options.max_threads > 1024) {
    return InvalidArgumentError("FUSE max_threads must be in [1, 1024], got " +
                                std::to_string(options.max_threads));
  }
  if (!ValidTimeout(options.attr_timeout_s) || !ValidTimeout(options.entry_timeout_s) ||
      !ValidTimeout(options.negative_timeout_s)) {
    return InvalidArgumentError("FUSE timeouts must be finite and >= 0");
  }
  if (options.readahead_kb > 65536) {
    return InvalidArgumentError("FUSE readahead_kb must be in [0, 65536], got " +
                                std::to_string(options.readahead_kb));
  }
  if (options.readdir_page_entries < 1 || options.readdir_page_entries > 100000) {
    return InvalidArgumentError("FUSE readdir_page_entries must be in [1, 100000]");
  }
  for (const std::string& opt : options.extra_options) {
    const std::string name = opt.substr(0, opt.find('='));
    if (opt.empty() || opt.find(',') != std::string::npos) {
      return InvalidArgumentError("FUSE option '" + opt + "' must be one name or name=value");
    }
    if (name == "rw" || name == "ro" || name == "max_read") {
      return InvalidArgumentError("FUSE option '" + opt +
                                  "' is not allowed: writability follows the mounts' write "
                                  "modes, and max_read is fixed");
    }
  }
  return Status::Ok();
}

// Checks the mount point and returns its canonical absolute path.
StatusOr<std::string> CheckMountpoint(const std::string& mountpoint) {
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) {
    const int err = errno;
    switch (err) {
      case ENOENT:
        return NotFoundError("mount point " + mountpoint + " does not exist");
      case ENOTCONN:
        return FailedPreconditionError("mount point " + mountpoint +
                                       " is a disconnected FUSE mount (transport endpoint is "
                                       "not connected); unmount it first: fusermount3 -u " +
                                       mountpoint);
      case EACCES:
        return PermissionDeniedError("mount point " + mountpoint + " is not accessible");
      case ENOTDIR:
        return InvalidArgumentError("mount point " + mountpoint + " is not a directory");
      default:
        return IoError("mount point " + mountpoint + ": " + std::strerror(err));
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgumentError("mount point " + mountpoint + " is not a directory");
  }
  char resolved[PATH_MAX];
  if (::realpath(mountpoint.c_str(), resolved) == nullptr) {
    return ErrnoToStatus(errno, "resolving mount point " + mountpoint);
  }
  return std::string(resolved);
}

Status CheckFuseDevice() {
  struct stat st;
  if (::stat("/dev/fuse", &st) != 0 || !S_ISCHR(st.st_mode)) {
    return FailedPreconditionError(
        "/dev/fuse is not available: load the fuse kernel module (modprobe fuse), or start the "
        "container with --device /dev/fuse --cap-add SYS_ADMIN");
  }
  return Status::Ok();
}

std::string MountOptionString(const FuseOptions& options) {
  // ro: the kernel refuses every write before it reaches us (rw: only when a mount is
  // write-through; read-only mounts answer EROFS themselves).
  // default_permissions: the kernel checks the modes itself (no access() round trips).
  // fsname/subtype: shows as "cairn on /mnt type fuse.cairn" in mount tables and df.
  // max_read: must match conn->max_read set in Filesystem::Init.
  std::string opts =
      std::string(options.writable ? "rw" : "ro") +
      ",default_permissions,fsname=cairn,subtype=cairn,max_read=" + std::to_string(kMaxIoBytes);
  if (options.allow_other) opts += ",allow_other";
  if (options.auto_unmount) opts += ",auto_unmount";
  for (const std::string& extra : options.extra_options) opts += "," + extra;
  return opts;
}

// Creates the libfuse session for `fs` and mounts it at `mountpoint`.
StatusOr<fuse_session*> NewMountedSession(Filesystem* fs, const std::string& mountpoint,
                                          const std::string& mount_options, bool debug) {
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  const bool args_ok = fuse_opt_add_arg(&args, "cairn") == 0 &&
                       fuse_opt_add_arg(&args, "-o") == 0 &&
                       fuse_opt_add_arg(&args, mount_options.c_str()) == 0 &&
                       (!debug || fuse_opt_add_arg(&args, "-d") == 0);
  if (!args_ok) {
    fuse_opt_free_args(&args);
    return ResourceExhaustedError("out of memory building FUSE arguments");
  }
  LogCapture capture;
  const fuse_lowlevel_ops& ops = Filesystem::Ops();
  fuse_session* session = fuse_session_new(&args, &ops, sizeof(ops), fs);
  fuse_opt_free_args(&args);
  if (session == nullptr) {
    return InvalidArgumentError("libfuse rejected the mount options '" + mount_options +
                                "': " + capture.Reason("see the log"));
  }
  if (fuse_session_mount(session, mountpoint.c_str()) != 0) {
    fuse_session_destroy(session);
    return IoError("mounting cairn at " + mountpoint +
                   " failed: " + capture.Reason("the kernel or fusermount3 refused (see stderr)"));
  }
  return session;
}

// What to run once the mount is initialised: raise its kernel readahead to `kb` (readahead.h).
std::function<void()> RaiseReadahead(const std::string& mountpoint, uint32_t kb) {
  StatusOr<std::string> device = MountDevice(mountpoint);
  if (!device.ok()) {
    spdlog::warn("fuse: kernel readahead left at its default: {}", device.status().ToString());
    return nullptr;
  }
  return [device = *device, kb] {
    Status s = SetReadaheadKb(device, kb);
    if (s.ok()) {
      spdlog::info("fuse: kernel readahead of the mount (bdi {}) set to {} KiB", device, kb);
    } else {
      spdlog::info("fuse: kernel readahead left at its default (128 KiB): {}", s.ToString());
    }
  };
}

}  // namespace

StatusOr<std::unique_ptr<FuseMount>> FuseMount::Mount(Client* client, const FuseOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidateOptions(client, options));
  CAIRN_ASSIGN_OR_RETURN(std::string mountpoint, CheckMountpoint(options.mountpoint));
  CAIRN_RETURN_IF_ERROR(CheckFuseDevice());

  InstallFuseLogBridge();
  if (options.debug) g_fuse_debug.store(true);

  FilesystemConfig config;
  config.attr_timeout_s = options.attr_timeout_s;
  config.entry_timeout_s = options.entry_timeout_s;
  config.negative_timeout_s = options.negative_timeout_s;
  config.readdir_page_entries = options.readdir_page_entries;
  config.uid = ::getuid();
  config.gid = ::getgid();
  auto fs = std::make_unique<Filesystem>(client, config);

  const std::string mount_options = MountOptionString(options);
  CAIRN_ASSIGN_OR_RETURN(fuse_session * session,
                         NewMountedSession(fs.get(), mountpoint, mount_options, options.debug));
  fs->set_session(session);
  if (options.readahead_kb > 0)
    fs->set_after_init(RaiseReadahead(mountpoint, options.readahead_kb));
  spdlog::info("fuse: mounted cairn at {} (-o {})", mountpoint, mount_options);
  return std::unique_ptr<FuseMount>(
      new FuseMount(std::move(mountpoint), options, std::move(fs), session));
}

FuseMount::FuseMount(std::string mountpoint, const FuseOptions& options,
                     std::unique_ptr<Filesystem> fs, fuse_session* session)
    : mountpoint_(std::move(mountpoint)),
      options_(options),
      fs_(std::move(fs)),
      session_(session) {}

FuseMount::~FuseMount() {
  {
    MutexLock lock(&mu_);
    if (state_ == State::kRunning) {
      // Destroying the session under a running loop would be a use-after-free in libfuse.
      spdlog::critical(
          "fuse: FuseMount destroyed while Run() is executing (call RequestStop "
          "and join the serving thread first)");
      std::abort();
    }
    state_ = State::kUnmounted;
  }
  Unmount();
  fuse_session_destroy(session_);
}

void FuseMount::Unmount() {
  bool unmount = false;
  {
    MutexLock lock(&mu_);
    unmount = !unmounted_;
    unmounted_ = true;
  }
  if (unmount) {
    // Lazy unmount (MNT_DETACH, or fusermount3 -u -z): never EBUSY because of a shell sitting in
    // the mount; closing the device fd also fails any request still waiting for an answer.
    fuse_session_unmount(session_);
    spdlog::info("fuse: unmounted {}", mountpoint_);
  }
  std::thread waker;
  {
    MutexLock lock(&mu_);
    waker = std::move(waker_);
  }
  if (waker.joinable()) waker.join();
}

Status FuseMount::Run() {
  bool serve = false;
  {
    MutexLock lock(&mu_);
    if (state_ != State::kMounted) return FailedPreconditionError("FuseMount::Run called twice");
    serve = !stop_requested_;
    state_ = serve ? State::kRunning : State::kUnmounted;
  }
  const int rc = serve ? Serve() : 0;
  Unmount();
  if (rc < 0) return IoError(std::string("FUSE session failed: ") + std::strerror(-rc));
  if (rc > 0) return IoError("FUSE session ended with code " + std::to_string(rc));
  return Status::Ok();
}

int FuseMount::Serve() {
  std::unique_ptr<SignalWatcher> watcher;
  if (options_.install_signal_handlers) {
    StatusOr<std::unique_ptr<SignalWatcher>> started = SignalWatcher::Start([this](int sig) {
      spdlog::info("fuse: {} received, unmounting {}", strsignal(sig), mountpoint_);
      RequestStop();
    });
    if (started.ok()) {
      watcher = std::move(*started);
    } else {
      spdlog::warn("fuse: not handling SIGINT/SIGTERM/SIGHUP ({}); stop with RequestStop()",
                   started.status().ToString());
    }
  }
  int rc = -ENOMEM;
  if (fuse_loop_config* loop_config = fuse_loop_cfg_create(); loop_config != nullptr) {
    fuse_loop_cfg_set_clone_fd(loop_config, 0);
    fuse_loop_cfg_set_max_threads(loop_config, static_cast<unsigned>(options_.max_threads));
    // Keep every worker alive while idle: creating threads under load costs more than the
    // memory of a few idle stacks.
    fuse_loop_cfg_set_idle_threads(loop_config, static_cast<unsigned>(options_.max_threads));
    rc = fuse_session_loop_mt(session_, loop_config);
    fuse_loop_cfg_destroy(loop_config);
  }
  watcher.reset();  // Joins a callback in flight, so no RequestStop runs past this point.
  MutexLock lock(&mu_);
  state_ = State::kUnmounted;  // From here on RequestStop starts no waker.
  return rc;
}

FuseMountStats FuseMount::Stats() const {
  FuseMountStats stats;
  stats.known_inodes = fs_->inodes().size();
  stats.open_files = fs_->open_files();
  stats.open_dirs = fs_->open_dirs();
  return stats;
}

void FuseMount::RequestStop() {
  MutexLock lock(&mu_);
  if (stop_requested_) return;
  stop_requested_ = true;
  if (state_ != State::kRunning) return;  // Run() checks the flag before serving.
  fuse_session_exit(session_);
  // fuse_session_exit only sets a flag; the workers sit in read(/dev/fuse) and the loop's main
  // thread waits for one of them to finish. One request through the mount wakes a worker, which
  // then sees the flag and ends the loop. statfs always reaches the daemon (the kernel caches
  // no statfs answer). If the loop already ended, the call waits until Run() unmounts, which
  // fails it with ENOTCONN; Run() joins this thread after unmounting.
  waker_ = std::thread([path = mountpoint_] {
    struct statfs st;
    ::statfs(path.c_str(), &st);
  });
}

}  // namespace cairn::fuse
