"""`cairn up` on bad input fails fast with one clear line; --help works; SIGINT/SIGTERM unmount
cleanly."""

import os
import signal
import subprocess
import time

import pytest

from conftest import free_port, is_mounted, read_file

FAIL_WITHIN_S = 5.0
CRASH_MARKERS = ["terminate called", "what():", "Aborted", "core dumped", "Segmentation",
                 "Traceback", "AddressSanitizer", "stack trace", "internal error"]


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (d / "a.bin").write_bytes(os.urandom(3000))
    return d


class Env:
    """Paths for one bad-input case; `cleanups` undo what the case set up (e.g. a mount)."""

    def __init__(self, tmp_path, src):
        self.tmp = tmp_path
        self.src = src
        self.mnt = tmp_path / "mnt"
        self.mnt.mkdir()
        self.cache = tmp_path / "cache"
        self.cleanups = []


def _read_only_dir(env):
    """A folder this process cannot write: a read-only tmpfs for root (root ignores modes),
    mode 0500 otherwise."""
    d = env.tmp / "readonly-fs"
    d.mkdir()
    if os.geteuid() == 0:
        rc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m,mode=0700", "tmpfs",
                             str(d)], capture_output=True, timeout=10)
        assert rc.returncode == 0, f"cannot mount a read-only tmpfs: {rc.stderr.decode()}"
        env.cleanups.append(lambda: subprocess.run(["umount", "-l", str(d)], timeout=10))
    else:
        d.chmod(0o500)
        env.cleanups.append(lambda: d.chmod(0o700))
    return d


def _under_a_file(env):
    f = env.tmp / "plainfile"
    f.write_bytes(b"x")
    return f / "cache"


def _world_writable(env):
    d = env.tmp / "ww"
    d.mkdir()
    d.chmod(0o1777)
    return d


# id -> (args builder, substrings the error line must contain)
CASES = {
    "unknown-scheme": (lambda e: ["ftp://x", e.mnt, "--cache-dir", e.cache], ["ftp"]),
    "unreachable-s3": (lambda e: ["s3://bucket/prefix", e.mnt, "--cache-dir", e.cache,
                                  "--endpoint", f"http://127.0.0.1:{free_port()}"],
                       ["127.0.0.1"]),
    "missing-source-folder": (lambda e: ["file://" + str(e.tmp / "nope"), e.mnt, "--cache-dir",
                                         e.cache], ["nope"]),
    "missing-mountpoint": (lambda e: ["file://" + str(e.src), e.tmp / "absent", "--cache-dir",
                                      e.cache], ["absent", "does not exist"]),
    "mountpoint-is-file": (lambda e: ["file://" + str(e.src), e.src / "a.bin", "--cache-dir",
                                      e.cache], ["a.bin", "not a folder"]),
    "cache-under-a-file": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir",
                                      _under_a_file(e)], ["plainfile"]),
    "cache-in-read-only-dir": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir",
                                          _read_only_dir(e) / "cache"], ["readonly-fs"]),
    "cache-is-read-only-dir": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir",
                                          _read_only_dir(e)], ["readonly-fs"]),
    "cache-world-writable": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir",
                                        _world_writable(e)], ["world-writable"]),
    "cache-size-abc": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir", e.cache,
                                  "--cache-size", "abc"], ["--cache-size", "abc"]),
    "cache-size-too-small": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir", e.cache,
                                        "--cache-size", "1KiB"], ["--cache-size"]),
    "page-size-1000": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir", e.cache,
                                  "--page-size", "1000"], ["--page-size"]),
    "metadata-ttl-bogus": (lambda e: ["file://" + str(e.src), e.mnt, "--cache-dir", e.cache,
                                      "--metadata-ttl", "soon"], ["--metadata-ttl"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_up_bad_input_fails_with_one_clear_line(cairn_bin, tmp_path, src, case):
    env = Env(tmp_path, src)
    build, must_contain = CASES[case]
    try:
        args = [str(a) for a in build(env)]
        if "--cache-size" not in args:
            args += ["--cache-size", "64MiB"]
        start = time.monotonic()
        # The secret comes from the environment (a --secret-key flag earns a warning line).
        proc = subprocess.Popen([cairn_bin, "up"] + args, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                cwd=tmp_path, start_new_session=True,
                                env={**os.environ, "AWS_ACCESS_KEY_ID": "k",
                                     "AWS_SECRET_ACCESS_KEY": "s"})
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"cairn up {' '.join(args)} was still running after 30s")
        finally:
            if is_mounted(env.mnt):
                subprocess.run(["fusermount3", "-u", "-z", str(env.mnt)], timeout=10)
        elapsed = time.monotonic() - start
    finally:
        for undo in env.cleanups:
            undo()
    err = err.decode("utf-8", "replace")
    assert proc.returncode > 0, f"exit code {proc.returncode} (negative: killed by a signal)"
    assert elapsed < FAIL_WITHIN_S, f"took {elapsed:.1f}s to fail"
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("cairn: error: "), lines[0]
    for s in must_contain:
        assert s in lines[0], f"{s!r} missing from {lines[0]!r}"
    for marker in CRASH_MARKERS:
        assert marker not in err
    assert not [f for f in os.listdir(tmp_path) if f.startswith("core")], "core file left"
    assert not is_mounted(env.mnt), "a failed start left a mount behind"


@pytest.mark.parametrize("sub", [None, "worker", "fuse", "up", "demo", "ls", "stat", "cat"])
def test_help_exits_zero(cairn_bin, sub):
    args = [cairn_bin] + ([sub] if sub else []) + ["--help"]
    out = subprocess.run(args, capture_output=True, timeout=10)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "Usage:" in text
    if sub:
        assert sub in text.split("Usage:", 1)[1].splitlines()[0]
    assert not out.stderr


def test_no_subcommand_is_a_usage_error(cairn_bin):
    out = subprocess.run([cairn_bin], capture_output=True, timeout=10)
    assert out.returncode == 2
    assert b"subcommand" in out.stderr


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_up_unmounts_cleanly_on_signal(harness, src, sig, busy):
    up = harness.up("file://" + str(src))
    path = os.path.join(up.mountpoint, "a.bin")
    assert read_file(path) == (src / "a.bin").read_bytes()
    held = os.open(path, os.O_RDONLY) if busy else None  # An open file must not block exit.
    try:
        up.send_signal(sig)
        rc = up.wait(timeout=10)
    finally:
        if held is not None:
            os.close(held)
    assert rc == 0, f"exit code {rc} after {sig.name}:\n{up.log_tail()}"
    assert not is_mounted(up.mountpoint), "mount still present after exit"
    assert "signal" in up.log_text()
