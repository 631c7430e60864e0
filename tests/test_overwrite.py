"""A source object overwritten while it is cached (file:// and s3://, --metadata-ttl 1s).

Every read of the whole file, before, during and after the overwrite, must return exactly the
old or exactly the new bytes: never a mix. A reader that keeps the file open across the
overwrite may get EIO (its version is gone) but never mixed bytes. Once the TTL (plus the
kernel's 1 s attribute/entry timeouts) has passed, a new open sees the new bytes.
"""

import errno
import os
import random
import threading
import time

import pytest

from conftest import MiB, S3_BUCKET, read_whole, wait_until


def _read_whole(path, direct=False):
    return read_whole(path, direct, chunk=4 * MiB)


TTL_S = 1.0
# Staleness bound for a new open: metadata TTL + kernel attribute timeout + negative/entry
# timeout (docs/fuse.md), plus slack for a loaded 2-core machine.
VISIBLE_WITHIN_S = TTL_S + 1.0 + 1.0 + 2.0


class Source:
    """Where the test object lives: a local folder or a prefix in s3rver."""

    def __init__(self, kind, harness, request):
        self.kind = kind
        if kind == "file":
            self.dir = harness.new_dir("ow-src")
            self.uri = "file://" + self.dir
            self.s3 = None
        else:
            self.s3 = request.getfixturevalue("s3server")
            self.prefix = f"overwrite-{os.getpid()}-{int(time.time() * 1000)}"
            self.uri = f"s3://{S3_BUCKET}/{self.prefix}"

    def write(self, name, data):
        if self.kind == "file":
            # Atomic replace, as a data pipeline publishes a file: readers of the source never
            # see a half-written object, so any mix seen through Cairn would be Cairn's.
            tmp = os.path.join(self.dir, f".{name}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(self.dir, name))
        else:
            self.s3.put(f"{self.prefix}/{name}", data)


@pytest.fixture(scope="module", params=["file", "s3"])
def ttl_mount(request, module_harness):
    src = Source(request.param, module_harness, request)
    # The source root must exist before `cairn up` probes it.
    src.write("seed.txt", b"seed")
    proc = module_harness.up(src.uri, s3=src.s3, extra=["--metadata-ttl", "1s"],
                             name=f"up-ttl-{request.param}")
    yield src, proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.mark.parametrize("held", [False, True], ids=["new-opens", "held-open"])
@pytest.mark.parametrize("change", ["same-size", "resized"])
def test_overwrite_never_mixes_and_becomes_visible(ttl_mount, change, held):
    """Readers that open the file anew (buffered and O_DIRECT) run through the overwrite;
    with `held`, one more reader keeps one descriptor open across it and rereads the file."""
    src, proc = ttl_mount
    rng = random.Random(change + str(held))
    name = f"obj-{change}-{'held' if held else 'new'}.bin"
    old = rng.randbytes(2 * MiB + MiB // 2 + 3)  # Three pages, the last one partial.
    new = rng.randbytes(len(old) if change == "same-size" else 3 * MiB + 11)
    assert old != new
    path = os.path.join(proc.mountpoint, name)

    src.write(name, old)
    wait_until(lambda: os.path.exists(path), 10, f"{name} to appear in the mount")
    assert _read_whole(path) == old

    # Until the worker has stored every page, a new open still pinned to the old version
    # could need the source for a page it no longer has; wait until a read needs no source.
    def cached():
        before = proc.metric("cairn_worker_bytes_from_ufs_total")
        assert _read_whole(path, direct=True) == old
        return proc.metric("cairn_worker_bytes_from_ufs_total") == before
    wait_until(cached, 10, "the old version to be fully cached")

    results = []  # (reader, start, end, outcome)
    lock = threading.Lock()
    stop = threading.Event()

    def classify(data):
        if data == old:
            return "old"
        if data == new:
            return "new"
        # A read cut short (the handle's version was superseded mid-read: the kernel returns
        # what it had before our EIO) is fine as long as every byte is of one version.
        if data and old.startswith(data):
            return "old-prefix"
        if data and new.startswith(data):
            return "new-prefix"
        # Which 256 KiB pieces came from which version: o(ld), n(ew), ?(neither).
        pieces = "".join(
            "o" if data[i:i + 256 * 1024] == old[i:i + 256 * 1024] else
            "n" if data[i:i + 256 * 1024] == new[i:i + 256 * 1024] else "?"
            for i in range(0, len(data), 256 * 1024))
        return f"MIXED({len(data)} bytes: {pieces})"

    def record(reader, start, outcome):
        with lock:
            results.append((reader, round(start, 3), round(time.monotonic(), 3), outcome))

    def attempt(tag, read):
        t = time.monotonic()
        try:
            outcome = classify(read())
        except OSError as e:
            outcome = f"error {errno.errorcode.get(e.errno, e.errno)}"
        record(tag, t, outcome)
        return outcome

    def fresh_reader(tag, direct):
        while not stop.is_set():
            attempt(tag, lambda: _read_whole(path, direct))

    held_fd = os.open(path, os.O_RDONLY) if held else None

    def held_reader():
        size = max(len(old), len(new)) + 1
        while not stop.is_set():
            if attempt("held", lambda: os.pread(held_fd, size, 0)).startswith("error"):
                time.sleep(0.01)  # An errored descriptor fails at once; do not spin.

    threads = [threading.Thread(target=fresh_reader, args=("fresh", False)),
               threading.Thread(target=fresh_reader, args=("fresh-direct", True))]
    if held:
        threads.append(threading.Thread(target=held_reader))
    tags = {"fresh", "fresh-direct"} | ({"held"} if held else set())
    visible_after = None
    last_stale_open = 0.0  # Seconds after the overwrite.
    for t in threads:
        t.start()
    try:
        def each_reader_read_old():
            with lock:
                return {r for r, _, _, o in results if o == "old"} == tags
        wait_until(each_reader_read_old, 10, "every reader to read the old content")

        t_overwrite = time.monotonic()
        src.write(name, new)
        # New opens in this thread poll for the new content (bounded: a failure must not hang).
        # The bound is on when an open is issued, not on when its read ends (a loaded machine
        # stretches a read, not the staleness): remember when the last open that still saw the
        # old content started.
        deadline = t_overwrite + VISIBLE_WITHIN_S + 3
        while time.monotonic() < deadline:
            started = time.monotonic()
            if attempt("poller", lambda: _read_whole(path)) == "new":
                visible_after = time.monotonic() - t_overwrite
                break
            last_stale_open = started - t_overwrite
            time.sleep(0.02)
        if visible_after is not None:
            # Keep every reader going for a while after the new content became visible.
            t_visible = t_overwrite + visible_after
            def enough_after():
                with lock:
                    return sum(1 for r, s, _, _ in results
                               if r.startswith("fresh") and s > t_visible + 1.0) >= 10
            wait_until(enough_after, 20, "new opens after the new content became visible")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        if held_fd is not None:
            os.close(held_fd)
    assert not any(t.is_alive() for t in threads), "a reader hung"
    # After every reader is gone, new opens must return the new bytes.
    final = [attempt("final", lambda: _read_whole(path)) for _ in range(3)] + \
        [attempt("final-direct", lambda: _read_whole(path, direct=True)) for _ in range(2)]

    def summary():
        out, last = [], {}
        for r, s, e, o in results:  # One line per change of outcome, per reader.
            if last.get(r) != o:
                out.append(f"{r}@{s - t_overwrite:+.2f}s:{o}")
                last[r] = o
        return "; ".join(out[:40])

    mixed = [r for r in results if r[3].startswith("MIXED")]
    assert not mixed, f"reads returned a mix of old and new bytes. Timeline: {summary()}"
    assert visible_after is not None, \
        f"no new open saw the new content within {VISIBLE_WITHIN_S + 3:.0f}s. Timeline: {summary()}"
    assert last_stale_open <= VISIBLE_WITHIN_S, \
        f"an open {last_stale_open:.2f}s after the overwrite still saw the old content " \
        f"(new content read {visible_after:.2f}s after it). Timeline: {summary()}"
    # A fresh reader whose open pinned the old version just before the new one was opened
    # elsewhere holds the file across the overwrite: EIO is its allowed outcome. Opens that
    # start once the new content is visible must all succeed.
    t_visible = t_overwrite + visible_after
    fresh_errors = [r for r in results if r[0] != "held" and r[3].startswith("error")
                    and (r[1] > t_visible or r[3] != "error EIO")]
    assert not fresh_errors, f"new opens failed: {fresh_errors[:10]}. Timeline: {summary()}"
    held_bad = [r for r in results if r[0] == "held"
                and r[3] not in ("old", "new", "old-prefix", "new-prefix", "error EIO")]
    fresh_prefix = [r for r in results if r[0] != "held" and r[3].endswith("-prefix")]
    assert not fresh_prefix, f"a whole-file read came back short: {fresh_prefix[:10]}"
    assert not held_bad, held_bad[:10]
    # A read that started after a new open saw the new bytes must not go back to the old ones.
    stale = [r for r in results if r[0] != "held" and r[1] > t_overwrite + visible_after and
             r[3] != "new"]
    assert not stale, f"new opens returned old bytes after the new ones were seen: {summary()}"
    assert final == ["new"] * 5, f"after all readers stopped: {final}. Timeline: {summary()}"
    assert proc.alive()
