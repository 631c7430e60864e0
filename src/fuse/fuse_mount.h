// FuseMount: mounts a cairn::Client namespace as a read-only POSIX filesystem through the Linux
// FUSE kernel module (libfuse3 low-level API) and serves it until stopped.
//
// Typical use (cairn fuse / cairn up):
//   CAIRN_ASSIGN_OR_RETURN(auto mount, FuseMount::Mount(client.get(), options));
//   return mount->Run();   // Returns after Ctrl-C / SIGTERM / SIGHUP / RequestStop / umount.
//
// The mount is "-o ro,default_permissions,fsname=cairn,subtype=cairn,max_read=1048576"
// (+ allow_other / auto_unmount when asked): the kernel enforces read-only and the 0444/0555
// modes itself; see docs/fuse.md for why each option is there.
#ifndef CAIRN_FUSE_FUSE_MOUNT_H_
#define CAIRN_FUSE_FUSE_MOUNT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/client.h"
#include "common/status.h"
#include "common/thread_annotations.h"

struct fuse_session;

namespace cairn::fuse {

class Filesystem;

struct FuseOptions {
  std::string mountpoint;  // An existing directory.
  // Let users other than the mounting one (root included) access the mount. Non-root mounts
  // need "user_allow_other" in /etc/fuse.conf for this.
  bool allow_other = false;
  int max_threads = 16;  // Worker threads serving requests, 1..1024.
  // How long the kernel may cache attributes / name->inode entries / "no such name" answers.
  // Match them to the client's metadata TTL or lower: staleness seen through the mount is
  // bounded by (client TTL + these).
  double attr_timeout_s = 1.0;
  double entry_timeout_s = 1.0;
  double negative_timeout_s = 1.0;
  int readdir_page_entries = 1024;  // max_entries per Client::ListDir call, 1..100000.
  // Ask fusermount3 to unmount if this process dies without unmounting (crash, SIGKILL).
  // Needs the fusermount3 binary (the mount then goes through it even as root) and is best
  // effort: fusermount3 3.14 can miss a teardown race (docs/fuse.md).
  bool auto_unmount = false;
  // Run() turns SIGINT/SIGTERM/SIGHUP into RequestStop() (a clean unmount), installing handlers
  // only for signals still at their default disposition (see signal_watcher.h). Only one mount
  // per process can do so at a time; turn this off when the caller handles signals itself and
  // calls RequestStop.
  bool install_signal_handlers = true;
  // The kernel's readahead for sequential readers of the mount, in KiB (0: leave the kernel's
  // 128 KiB). Raising it needs root (readahead.h); without, a notice is logged. 0..65536.
  uint32_t readahead_kb = 4096;
  bool debug = false;  // libfuse request tracing (-d), logged through spdlog at info level.
  // Mount read-write ("-o rw"): files of write-through mounts can be created, written,
  // truncated and removed (docs/fuse.md, "Writes"); read-only mounts still answer EROFS. False:
  // "-o ro", and the kernel refuses every write before it reaches the filesystem.
  bool writable = false;
  // Further "-o" options passed to libfuse verbatim ("name" or "name=value"). Options that
  // would override `writable` or the negotiated I/O size ("rw", "ro", "max_read") are rejected.
  std::vector<std::string> extra_options;
};

// Point-in-time counters of a mount (for metrics and tests).
struct FuseMountStats {
  uint64_t known_inodes = 0;  // Inode numbers the kernel holds references to, root included.
  uint64_t open_files = 0;
  uint64_t open_dirs = 0;
};

class FuseMount {
 public:
  // Mounts `client`'s namespace at options.mountpoint. `client` is not owned and must outlive
  // the returned FuseMount. The mount is live on return; requests are answered once Run()
  // starts (until then accesses to the mount block).
  // Errors:
  //   InvalidArgument    null client, bad option values, an unknown or forbidden "-o" option,
  //                      mount point not a directory.
  //   NotFound           "mount point /x does not exist".
  //   FailedPrecondition /dev/fuse missing; the mount point is a dead FUSE mount ("transport
  //                      endpoint is not connected": unmount it with fusermount3 -u).
  //   PermissionDenied   the mount point cannot be accessed.
  //   IoError            the kernel or fusermount3 refused the mount (the message carries
  //                      libfuse's reason where it gave one).
  //   ResourceExhausted  out of memory building libfuse's arguments.
  static StatusOr<std::unique_ptr<FuseMount>> Mount(Client* client, const FuseOptions& options);

  // Unmounts if still mounted. Must not run while Run() is executing on another thread: call
  // RequestStop() and join that thread first.
  ~FuseMount();

  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  // Serves requests on options.max_threads worker threads until SIGINT/SIGTERM/SIGHUP (when
  // install_signal_handlers), RequestStop(), or an external unmount; then unmounts and returns.
  // OK for each of those endings. FailedPrecondition when called a second time; IoError when
  // the session ended on a FUSE protocol error (the mount is still removed).
  // Thread-safety: call from one thread at a time.
  Status Run();

  // Makes Run() return (after unmounting) soon: once the requests being served complete (a
  // request stuck in the client holds it up to the client's deadlines). If Run() has not
  // started yet, it returns right away when it does. Idempotent. Thread-safe; not
  // async-signal-safe (from a signal handler use the installed handlers or a self-pipe).
  void RequestStop();

  // The canonical absolute mount point.
  const std::string& mountpoint() const { return mountpoint_; }
  // Thread-safe.
  FuseMountStats Stats() const;

 private:
  enum class State { kMounted, kRunning, kUnmounted };

  FuseMount(std::string mountpoint, const FuseOptions& options, std::unique_ptr<Filesystem> fs,
            fuse_session* session);
  // Runs the session loop (with the signal watcher) until it ends; returns its result.
  int Serve();
  // Unmounts (if mounted) and joins the wake-up thread. Idempotent.
  void Unmount();

  const std::string mountpoint_;
  const FuseOptions options_;
  const std::unique_ptr<Filesystem> fs_;
  fuse_session* const session_;

  Mutex mu_;
  State state_ GUARDED_BY(mu_) = State::kMounted;
  bool stop_requested_ GUARDED_BY(mu_) = false;
  bool unmounted_ GUARDED_BY(mu_) = false;
  // Sends one request into the mount so a worker blocked on /dev/fuse wakes up and notices the
  // stop; see RequestStop().
  std::thread waker_ GUARDED_BY(mu_);
};

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_FUSE_MOUNT_H_
