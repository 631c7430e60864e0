"""Child processes of the benchmark: daemons started in the foreground, stopped by PID.

Every daemon (s3rver, `cairn up`, s3fs, rclone) runs as a direct child of the benchmark so it owns
the PID: it is started in its own session (a Ctrl-C at the terminal reaches only the benchmark,
which then stops children in order) and with PR_SET_PDEATHSIG, so even a SIGKILLed benchmark does
not leave a daemon or a mount behind. `stop_all()` runs from try/finally and from atexit; it is
idempotent.
"""
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_CLK_TCK = os.sysconf("SC_CLK_TCK")

# Daemons still running, in start order; stop_all() walks it backwards.
_live = []
_live_lock = threading.Lock()


class DaemonError(RuntimeError):
    """A daemon failed to start, died, or did not become ready."""


def _child_setup():
    # Runs in the child between fork and exec (only ever spawned from the main thread, where
    # preexec_fn is safe). SIGTERM on the parent's death: a killed benchmark leaves no daemon.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def free_port():
    """Returns a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unescape_mount_field(field):
    # /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1:i + 4]) == 3 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_under(prefix):
    """Mount points equal to or below `prefix`, from /proc/self/mountinfo.

    Reads the kernel table instead of stat()ing the path, so a hung FUSE daemon cannot block it.
    """
    prefix = os.path.realpath(prefix)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = _unescape_mount_field(line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return found


def is_mounted(path):
    return os.path.realpath(path) in mounts_under(path)


def lazy_unmount(path):
    """Detaches a FUSE mount even if busy; returns True if nothing is mounted there afterwards."""
    for _ in range(3):
        if not is_mounted(path):
            return True
        subprocess.run(["fusermount3", "-u", "-z", path], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False, timeout=30)
        if not is_mounted(path):
            return True
        time.sleep(0.2)
    return not is_mounted(path)


def http_get(url, timeout=2.0):
    """GET without any proxy; returns (status, body bytes) or (None, b'') if unreachable."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, OSError):
        return None, b""


class Daemon:
    """One foreground daemon owned by the benchmark.

    `mountpoint`, if given, is unmounted (lazily, forced) whenever the daemon is stopped, so a
    daemon that died or ignored SIGTERM cannot leave a dead mount behind.
    """

    def __init__(self, name, argv, log_path, env=None, mountpoint=None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.mountpoint = mountpoint
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self):
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         preexec_fn=_child_setup, start_new_session=True)
        finally:
            log.close()
        with _live_lock:
            _live.append(self)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - n))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self, check, timeout_s, what):
        """Polls `check()` every 50 ms until it is true; raises DaemonError on death or timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.alive():
                raise DaemonError(f"{self.name} exited (status {self.proc.returncode}) before "
                                  f"{what}; log {self.log_path}:\n{self.log_tail()}")
            try:
                if check():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise DaemonError(f"{self.name} not ready ({what}) after {timeout_s:.0f} s; "
                                  f"log {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.05)

    def cpu_seconds(self):
        """User + system CPU time of the daemon (all threads), or None if it is gone."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLK_TCK
        except (OSError, IndexError, ValueError, TypeError):
            return None

    def rss_bytes(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return None

    def kill_now(self):
        """Watchdog path: SIGKILL and detach the mount so blocked readers get an error."""
        if self.alive():
            self.proc.kill()
        if self.mountpoint:
            lazy_unmount(self.mountpoint)

    def stop(self, grace_s=15.0):
        """SIGTERM, wait, then lazy-unmount and SIGKILL; always leaves the mount point free."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                if self.mountpoint:
                    lazy_unmount(self.mountpoint)
                self.proc.kill()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        if self.mountpoint and not lazy_unmount(self.mountpoint):
            print(f"WARNING: {self.mountpoint} is still mounted after stopping {self.name}",
                  flush=True)
        with _live_lock:
            if self in _live:
                _live.remove(self)


def stop_all():
    """Stops every live daemon, newest first. Safe to call more than once."""
    while True:
        with _live_lock:
            if not _live:
                return
            d = _live[-1]
        try:
            d.stop()
        except Exception as e:  # noqa: BLE001 - cleanup must go on for the others.
            print(f"WARNING: stopping {d.name} (pid {d.pid}) failed: {e}", flush=True)
            with _live_lock:
                if d in _live:
                    _live.remove(d)


class Watchdog:
    """Kills `daemon` if a measurement outlives `timeout_s`, so a hung read cannot hang the run.

    Use as a context manager around one measurement; `fired` tells whether it had to act.
    """

    def __init__(self, daemon, timeout_s, label):
        self.daemon = daemon
        self.timeout_s = timeout_s
        self.label = label
        self.fired = False
        self._done = threading.Event()
        self._thread = None

    def _run(self):
        if self._done.wait(self.timeout_s):
            return
        self.fired = True
        print(f"WATCHDOG: {self.label} ran past {self.timeout_s:g} s; killing "
              f"{self.daemon.name if self.daemon else 'nothing'}", flush=True)
        if self.daemon is not None:
            self.daemon.kill_now()

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        return False
