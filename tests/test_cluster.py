"""Cluster mode (issue 3): workers and the mount table in etcd, several `cairn worker`
processes, `cairn fuse` clients that follow etcd, and `cairn mount|status` commands.

Every test gets its own etcd (fixture `etcd`, tests/cluster_util.py) on free loopback ports and
its own workers with fresh cache folders, so "uncached" means uncached for that test.

The FUSE client keeps up to 256 MiB of pages in its own page buffer (readahead results), and
reads of a page found there never reach a worker. Tests that must see a worker serve a read
therefore either use a fresh `cairn fuse` for the re-read, or read in a pattern the buffer does
not keep: O_DIRECT reads that are neither sequential nor a whole page (backwards in 768 KiB
steps, or random unaligned ranges), which the client sends to the page's worker every time.
"""

import errno
import hashlib
import json
import os
import random
import signal
import threading
import time

import pytest

from cluster_util import (etcd, CLIENT_FAILOVERS, CLIENT_FALLBACK_BYTES, CLIENT_MOUNT_UPDATES,
                          CLIENT_PAGE_READS, CLIENT_WORKERS, COALESCED, CRASH_MARKERS,
                          ETCD_CONNECTED, HITS, MISSES, PAGES, READ_AHEAD, REGISTERED, REQUESTS,
                          UFS_BYTES, Cluster,
                          metrics_of, one_error_line, save_then_rename, sigcont,
                          sigstop)
from conftest import KiB, MiB, free_port, is_mounted, read_whole, wait_until
from lake import Lake

LEASE_TTL = 2          # --lease-ttl of every worker here (seconds).
WORKER_TIMEOUT = 1.0   # --worker-timeout of the failover tests (seconds).
# The slowest single read() allowed while workers die or freeze: a request to a frozen worker
# costs one worker timeout, the failover read one more in the worst case; +1 s margin for this
# shared 2-core machine (scheduling, page-store writes, etcd churn).
READ_DEADLINE = 2 * WORKER_TIMEOUT + 1.0
MOUNT = "/data/lake"


def _env_without_etcd():
    env = dict(os.environ)
    env.pop("CAIRN_ETCD", None)
    return env


# ------------------------------------------------------------------------------------------
# Fixtures
# ------------------------------------------------------------------------------------------



@pytest.fixture
def cluster(etcd, harness):
    # `etcd` is set up before `harness`, so it is torn down after it: workers still reach
    # etcd while they deregister on SIGTERM.
    return Cluster(harness, etcd, lease_ttl=LEASE_TTL)



@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """~54 MiB: empty to 17 MiB files (several > 8 pages), small files in folders, and 40
    one-page files under cold/ that some tests keep unread as "uncached" data."""
    rng = random.Random(33)
    sizes = {"empty.bin": 0, "one.bin": 1, "odd-4095.bin": 4095, "page-minus-1.bin": MiB - 1,
             "page1.bin": MiB, "page-plus-1.bin": MiB + 1, "page3.bin": 3 * MiB,
             "big9.bin": 9 * MiB + 123, "big12.bin": 12 * MiB,
             "sub/dir/big17.bin": 17 * MiB + 5, "name with spaces.bin": 2 * MiB + 7}
    for i in range(12):
        sizes[f"sub/small-{i:02d}.txt"] = rng.randrange(1, 5000)
    for i in range(40):
        sizes[f"cold/c{i:02d}.bin"] = 200 * KiB + 37 * i
    files = {n: rng.randbytes(s) for n, s in sizes.items()}
    root = tmp_path_factory.mktemp("lake") / "src"
    return Lake(root, files)


def _small_lake(tmp_path, name, seed, count=3):
    rng = random.Random(seed)
    files = {f"x{i}.bin": rng.randbytes(rng.randrange(1, 3 * MiB)) for i in range(count)}
    root = tmp_path / name
    return Lake(root, files)


# ------------------------------------------------------------------------------------------
# Reading helpers
# ------------------------------------------------------------------------------------------

class ReadStats:
    """Thread-safe record of read() latencies, errors and completion times."""

    def __init__(self):
        self.lock = threading.Lock()
        self.max_s = 0.0
        self.max_at = None
        self.calls = 0
        self.errors = []
        self.done_at = []  # monotonic time of every completed read() call
        self.spans = []  # (start, end, what) of every completed call, reads and opens

    def add(self, seconds, what, count=True):
        with self.lock:
            now = time.monotonic()
            self.spans.append((now - seconds, now, what))
            if not count:
                return
            self.calls += 1
            self.done_at.append(now)
            if seconds > self.max_s:
                self.max_s, self.max_at = seconds, what

    def error(self, msg):
        with self.lock:
            self.errors.append(msg)

    def completed_between(self, t0, t1):
        with self.lock:
            return sum(1 for t in self.done_at if t0 <= t <= t1)

    def around(self, t0, t1, base):
        """The calls that overlap [t0, t1], as text with times relative to `base`."""
        with self.lock:
            hits = [(s, e, w) for s, e, w in self.spans if s <= t1 and e >= t0]
            before = [sp for sp in self.spans if sp[1] < t0][-2:]
            after = [sp for sp in self.spans if sp[0] > t1][:2]
        return "; ".join(f"{w} {s - base:+.3f}..{e - base:+.3f}s"
                         for s, e, w in before + hits + after)


def timed_pread(fd, n, off, stats, what):
    t = time.monotonic()
    b = os.pread(fd, n, off)
    stats.add(time.monotonic() - t, what)
    return b


def read_seq_timed(path, stats, chunk=MiB):
    """Whole file, sequential O_DIRECT reads of `chunk` bytes, each read() timed."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        parts, off = [], 0
        while True:
            b = timed_pread(fd, chunk, off, stats, f"{path}@{off}")
            if not b:
                return b"".join(parts)
            parts.append(b)
            off += len(b)
    finally:
        os.close(fd)


def read_backwards_timed(path, size, stats, chunk=768 * KiB):
    """Whole file read from its end to its start in `chunk`-sized O_DIRECT reads. 768 KiB is
    never a whole 1 MiB page at a page start (except a short last page), and no read starts
    where the previous one ended, so the client sends every read to the page's worker instead
    of keeping it in its page buffer. The open is recorded too (not counted as a read)."""
    t = time.monotonic()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    stats.add(time.monotonic() - t, f"open {path}", count=False)
    try:
        parts = []
        off = ((size - 1) // chunk) * chunk if size else 0
        while off >= 0 and size:
            want = min(chunk, size - off)
            b = timed_pread(fd, want, off, stats, f"{path}@{off}")
            if len(b) != want:
                raise IOError(f"short read at {off}: {len(b)} of {want}")
            parts.append(b)
            off -= chunk
        # An empty file: one read at 0 must return nothing.
        if not size and timed_pread(fd, chunk, 0, stats, f"{path}@0"):
            raise IOError("bytes read from an empty file")
        return b"".join(reversed(parts))
    finally:
        os.close(fd)


def mount_path(fuse, rel, mount=MOUNT):
    return os.path.join(fuse.mountpoint, mount.lstrip("/"), rel)


def read_all(fuse, lake, names=None, mount=MOUNT):
    """Reads files whole through the mount (O_DIRECT, 1 MiB) and compares every byte."""
    for name in names or lake.names():
        got = read_whole(mount_path(fuse, name, mount), direct=True)
        assert got == lake.files[name], f"{name}: wrong bytes ({len(got)} read)"


def wait_readable(path, data, timeout):
    """Seconds until `path` reads as `data` (it may not exist at first)."""
    t0 = time.monotonic()

    def ok():
        try:
            return read_whole(path, direct=True) == data
        except OSError:
            return False
    wait_until(ok, timeout, f"{path} to be readable", interval=0.05)
    return time.monotonic() - t0


def wait_gone(path, timeout):
    t0 = time.monotonic()
    wait_until(lambda: not os.path.exists(path), timeout, f"{path} to disappear", interval=0.05)
    return time.monotonic() - t0


def start_workers(cluster, n, first=1):
    started = [cluster.start_worker(f"w{i}") for i in range(first, first + n)]
    cluster.wait_ring_settled()
    return started


# ------------------------------------------------------------------------------------------
# 1. Three workers, one FUSE client, the mount table in etcd
# ------------------------------------------------------------------------------------------

def test_three_workers_spread_pages_and_status(cluster, lake):
    start_workers(cluster, 3)
    cluster.mount_add(MOUNT, lake.uri, "--metadata-ttl", "5s")
    fuse = cluster.fuse()

    read_all(fuse, lake)
    # A second, buffered read of a few files through Python's open().
    for name in ["big9.bin", "name with spaces.bin", "sub/dir/big17.bin"]:
        with open(mount_path(fuse, name), "rb") as f:
            assert f.read() == lake.files[name], name
    assert sorted(os.listdir(os.path.join(fuse.mountpoint, "data"))) == ["lake"]
    assert sorted(os.listdir(mount_path(fuse, "sub"))) == sorted(os.listdir(lake.root / "sub"))

    m = {w: metrics_of(p.metrics_port) for w, p in cluster.workers.items()}
    total_pages = lake.pages()
    for w in m:
        assert m[w].get(REQUESTS, 0) > 0, f"{w} got no request: pages not spread ({m[w]})"
    # One source fetch per page: its own miss's, or read ahead by the miss of the page before it
    # (a read of a page being read ahead joins it: coalesced; one that comes after the run was
    # stored is a hit, which is why misses alone can fall short of the pages).
    fetches = {w: m[w].get(MISSES, 0) - m[w].get(COALESCED, 0) + m[w].get(READ_AHEAD, 0)
               for w in m}
    for w in m:
        # Rendezvous hashing over 3 workers: each owns about a third of the ~110 pages.
        assert fetches[w] >= 0.15 * total_pages, f"{w}: {fetches[w]} of {total_pages} pages"
    assert sum(fetches.values()) == total_pages, (fetches, m)
    # Each page came from the source exactly once, on its owner.
    assert sum(x.get(UFS_BYTES, 0) for x in m.values()) == lake.bytes()

    status = cluster.status()
    by_id = {w["id"]: w for w in status["workers"]}
    assert sorted(by_id) == ["w1", "w2", "w3"], status
    for wid, p in cluster.workers.items():
        w = by_id[wid]
        assert w["state"] == "up", w
        assert w["address"] == f"127.0.0.1:{p.listen_port}", w
        assert w["metrics_address"] == f"127.0.0.1:{p.metrics_port}", w
        assert w["capacity_bytes"] == 256 * MiB, w
        assert w["misses"] == m[wid][MISSES], (w, m[wid][MISSES])
    assert len(status["mounts"]) == 1, status
    mnt = status["mounts"][0]
    assert mnt["path"] == MOUNT and mnt["uri"].rstrip("/") == lake.uri, mnt
    assert mnt["replicas"] == 1 and mnt["metadata_ttl_ms"] == 5000 and mnt["read_only"], mnt

    ls = cluster.cli(["mount", "ls"])
    assert ls.returncode == 0, ls.stderr
    assert MOUNT in ls.stdout.decode() and lake.uri in ls.stdout.decode(), ls.stdout
    ls_json = json.loads(cluster.cli(["mount", "ls", "--json"]).stdout)
    assert [(x["path"], x["uri"].rstrip("/")) for x in ls_json] == [(MOUNT, lake.uri)]

    # The one-shot commands read through the same cluster.
    cat = cluster.cli(["cat", f"{MOUNT}/page3.bin"])
    assert cat.returncode == 0 and cat.stdout == lake.files["page3.bin"], cat.stderr
    names = cluster.cli(["ls", f"{MOUNT}/sub"]).stdout.decode().split()
    assert "dir/" in names and "small-00.txt" in names, names
    st = json.loads(cluster.cli(["stat", f"{MOUNT}/big12.bin"]).stdout)
    assert st["size"] == 12 * MiB, st


def test_s3_mount_credentials_from_environment(cluster, s3server, tmp_path, monkeypatch):
    """An s3:// mount whose endpoint is in etcd and whose keys only the processes' environment
    has (`mount add` refuses to store secrets)."""
    src = _small_lake(tmp_path, "s3src", seed=8, count=4)
    for name, data in src.files.items():
        s3server.put(f"cluster/{name}", data)
    for var, value in (("AWS_ACCESS_KEY_ID", "S3RVER"), ("AWS_SECRET_ACCESS_KEY", "S3RVER")):
        monkeypatch.setenv(var, value)  # Inherited by every cairn process started below.
    start_workers(cluster, 2)
    cluster.mount_add("/s3", "s3://cairn-it/cluster", "--endpoint", s3server.endpoint,
                      "--region", "us-east-1")
    fuse = cluster.fuse()
    read_all(fuse, src, mount="/s3")
    assert all(cluster.metric(w, REQUESTS) > 0 for w in ("w1", "w2"))
    assert cluster.metric_sum(UFS_BYTES) == src.bytes()
    stored = cluster.status()["mounts"][0]
    assert stored["options"].get("endpoint") == s3server.endpoint, stored
    assert not {"access_key", "secret_key", "session_token"} & set(stored["options"]), stored


def _write_back_cluster(cluster, tmp_path, before_fuse=None):
    """Three workers holding closed files 10 minutes, a write-back mount /wb of a new folder,
    and a FUSE client with the folder ckpt made in it: (the mount's folder, ckpt's path through
    the client). `before_fuse` runs once the workers are started, before the client is."""
    src = tmp_path / "wbsrc"
    src.mkdir()
    for i in (1, 2, 3):
        cluster.start_worker(f"w{i}", extra=["--write-back-delay", "10m"])
    if before_fuse is not None:
        before_fuse()
    cluster.wait_ring_settled()
    cluster.mount_add("/wb", f"file://{src}", "--write-mode", "back")
    writer = cluster.fuse(name="writer")
    folder = mount_path(writer, "ckpt", mount="/wb")
    os.mkdir(folder)
    return src, folder


def test_a_listing_shows_write_back_files_pending_at_every_worker(cluster, tmp_path):
    """A write-back file waits at the owner of its own path; a listing is answered by one
    worker, which asks the others for theirs (ListPending): every file closed shows at once to
    another client, before any upload (the workers hold their files for 10 minutes here)."""
    src, folder = _write_back_cluster(cluster, tmp_path)
    files = {f"shard-{i:02d}.pt": random.Random(i).randbytes(1000 + 97 * i) for i in range(12)}
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    assert os.listdir(src / "ckpt") == []  # Nothing uploaded yet.
    held = {w: cluster.metric(w, "cairn_worker_write_back_pending_files") for w in cluster.workers}
    assert sum(held.values()) == len(files) and sum(1 for n in held.values() if n) >= 2, held

    reader = cluster.fuse(name="reader")
    seen = mount_path(reader, "ckpt", mount="/wb")
    assert sorted(os.listdir(seen)) == sorted(files)
    for name, data in files.items():
        with open(os.path.join(seen, name), "rb") as f:
            assert f.read() == data, name
    assert sorted(os.listdir(mount_path(reader, "", mount="/wb"))) == ["ckpt"]

    # A folder whose files wait is not empty, whichever worker they wait at (each of these
    # holds one file, which waits at the owner of its own path, mostly not the folder's): an
    # rmdir answered OK would let the uploads bring the folder back.
    lone = [os.path.join(folder, f"sub-{i}") for i in range(6)]
    for sub in lone:
        os.mkdir(sub)
        with open(os.path.join(sub, "x.pt"), "wb") as f:
            f.write(b"w" * 100)
    for sub in lone:
        with pytest.raises(OSError) as refused:
            os.rmdir(sub)
        assert refused.value.errno == errno.ENOTEMPTY, sub


def test_a_checkpoint_renamed_across_owners_waits_for_no_upload(cluster, tmp_path):
    """The checkpoint idiom on a write-back mount in a cluster: each file saved under a
    temporary name, then renamed. Where another worker owns the new name, the owner of the old
    one passes the file to it (HandOver) instead of uploading it first: no rename waits for the
    lake (nothing is uploaded for 10 minutes here), another client sees every final name with
    its bytes at once and no temporary name, and the lake gets the final names only."""
    src, folder = _write_back_cluster(cluster, tmp_path)
    files = {f"step-{i:03d}.pt": random.Random(200 + i).randbytes(300_000 + 4099 * i)
             for i in range(12)}
    for name, data in files.items():
        save_then_rename(folder, name, data)
    assert os.listdir(src / "ckpt") == []  # No rename made an upload happen.
    passed = {w: cluster.metric(w, "cairn_worker_write_back_hand_overs_total")
              for w in cluster.workers}
    # The ring is fixed by the worker ids: 9 of these 12 renames cross owners.
    assert sum(passed.values()) >= 3, passed

    reader = cluster.fuse(name="reader")
    seen = mount_path(reader, "ckpt", mount="/wb")
    assert sorted(os.listdir(seen)) == sorted(files)
    for name, data in files.items():
        with open(os.path.join(seen, name), "rb") as f:
            assert f.read() == data, name
    synced = cluster.cli(["sync", "/wb", "--timeout", "120s"], timeout=180)
    assert synced.returncode == 0, synced.stderr.decode(errors="replace")
    assert sorted(os.listdir(src / "ckpt")) == sorted(files)
    for name, data in files.items():
        assert (src / "ckpt" / name).read_bytes() == data, name


def test_a_crash_while_a_renamed_file_is_passed_on_loses_nothing(cluster, tmp_path,
                                                                  monkeypatch):
    """kill -9 of the owner of the old name just after the owner of the new name journaled the
    file it was passed (CAIRN_CRASH_AT=write-back-handed-over, src/common/crash_point.h): the
    rename fails (its client got no answer), the file is under the new name already, and the
    restarted worker still holds it under the old name: nothing acknowledged is lost
    (docs/consistency.md, "Write-back mounts"). The rename fails with EIO, whose outcome is unknown, not ENOENT: the client does not ask the
    next owner of the old name (which holds nothing of it) once the first got the request; the
    same rename again, once the worker is back, completes it (only the new name reaches the
    lake)."""
    monkeypatch.setenv("CAIRN_CRASH_AT", "write-back-handed-over")  # The workers only:
    src, folder = _write_back_cluster(cluster, tmp_path,
                                      before_fuse=lambda: monkeypatch.delenv("CAIRN_CRASH_AT"))
    crashed = None
    for i in range(12):  # Until a rename crosses owners (two in three do, with 3 workers).
        name = f"step-{i:03d}.pt"
        data = random.Random(400 + i).randbytes(500_000 + 4099 * i)
        try:
            save_then_rename(folder, name, data)
        except OSError as e:
            crashed = (name, data, e)
            break
    assert crashed is not None, "no rename crossed owners"
    name, data, error = crashed
    assert error.errno == errno.EIO, error
    # The client saw the connection close; the process may take a moment more to be gone.
    dead = wait_until(lambda: [w for w, p in cluster.workers.items() if not p.alive()], 10,
                      "the crashed worker's exit")
    assert len(dead) == 1, dead
    cluster.restart_worker(dead[0])
    cluster.wait_ring_settled()
    # The rename's outcome was unknown (EIO), so the job renames again: that completes it.
    os.replace(os.path.join(folder, name + ".tmp"), os.path.join(folder, name))
    synced = cluster.cli(["sync", "/wb", "--timeout", "120s"], timeout=180)
    assert synced.returncode == 0, synced.stderr.decode(errors="replace")
    assert (src / "ckpt" / name).read_bytes() == data
    assert not (src / "ckpt" / (name + ".tmp")).exists()


# ------------------------------------------------------------------------------------------
# 2. Chaos: workers killed, restarted and frozen while a reader reads epoch after epoch
# ------------------------------------------------------------------------------------------

CHAOS_SECONDS = 24.0
CHAOS_PERIOD = 2.0   # Pause between two chaos events, and how long a killed worker stays dead.
FREEZE_SECONDS = 3.0  # Longer than LEASE_TTL: the frozen worker loses its lease.


def test_chaos_kill_restart_freeze_workers(cluster, lake):
    start_workers(cluster, 3)
    cluster.mount_add(MOUNT, lake.uri)
    # One cold epoch first, through another client, so that chaos meets cached pages too (a
    # page in this client's buffer would never reach a worker again).
    warm = cluster.fuse(name="fuse-warm")
    read_all(warm, lake)
    assert warm.stop() == 0
    # --no-short-circuit: every page read goes over TCP, so every read can meet a dead or
    # frozen worker (short-circuit reads of a local page file would not notice a frozen one).
    fuse = cluster.fuse(extra=["--worker-timeout", f"{WORKER_TIMEOUT:g}s", "--no-short-circuit"],
                        metrics=True)
    names = lake.names()
    stats = ReadStats()
    stop = threading.Event()
    epochs = [0]
    windows = []  # (kind, worker, start, end)
    chaos_errors = []

    def reader():
        while not stop.is_set():
            for name in names:
                path = mount_path(fuse, name)
                try:
                    got = read_backwards_timed(path, len(lake.files[name]), stats)
                    if hashlib.sha256(got).hexdigest() != lake.sha[name]:
                        stats.error(f"epoch {epochs[0]} {name}: wrong bytes ({len(got)})")
                except Exception as e:  # Reported by the assertions below.
                    stats.error(f"epoch {epochs[0]} {name}: {e!r}")
                if stop.is_set():
                    return
            epochs[0] += 1

    def chaos():
        ids = ["w1", "w2", "w3"]
        step = 0
        t_end = time.monotonic() + CHAOS_SECONDS
        try:
            while time.monotonic() < t_end and not stop.is_set():
                wid = ids[step % 3]
                if step % 2 == 0:  # kill -9, then the same id, ports and cache folder again.
                    t0 = time.monotonic()
                    cluster.workers[wid].kill9()
                    time.sleep(CHAOS_PERIOD)
                    cluster.restart_worker(wid, wait_registered=False)
                    windows.append(("kill9", wid, t0, time.monotonic()))
                else:  # Frozen for longer than its lease TTL: it leaves the ring and returns.
                    p = cluster.workers[wid]
                    t0 = time.monotonic()
                    sigstop(p)
                    try:
                        time.sleep(FREEZE_SECONDS)
                    finally:
                        sigcont(p)
                    windows.append(("sigstop", wid, t0, time.monotonic()))
                step += 1
                time.sleep(CHAOS_PERIOD)
        except Exception as e:
            chaos_errors.append(repr(e))
        finally:
            for p in cluster.workers.values():
                sigcont(p)

    t_reader = threading.Thread(target=reader, daemon=True)
    t_chaos = threading.Thread(target=chaos, daemon=True)
    t_reader.start()
    t_chaos.start()
    t_chaos.join(timeout=CHAOS_SECONDS + 60)
    stop.set()
    t_reader.join(timeout=60)
    assert not t_chaos.is_alive() and not t_reader.is_alive(), "chaos or reader hung"
    print(f"\nchaos: {epochs[0]} full epochs, {stats.calls} read() calls, "
          f"max read() {stats.max_s:.3f}s at {stats.max_at}; events: "
          + ", ".join(f"{k} {w} {e - s:.1f}s" for k, w, s, e in windows))
    assert not chaos_errors, chaos_errors
    assert not stats.errors, stats.errors[:10]
    # The reads reached the workers (not the client's page buffer: each read() of 768 KiB
    # touches one or two pages), and the chaos reached the reads.
    cm = fuse.metrics()
    print(f"client: {cm.get(CLIENT_PAGE_READS, 0):.0f} page requests, "
          f"{cm.get(CLIENT_FAILOVERS, 0):.0f} failed over, "
          f"{cm.get(CLIENT_FALLBACK_BYTES, 0):.0f} bytes read from the source directly")
    assert cm.get(CLIENT_PAGE_READS, 0) >= 0.5 * stats.calls, (cm, stats.calls)
    assert cm.get(CLIENT_FAILOVERS, 0) > 0, "no request ever failed over: chaos missed the reads"
    assert len(windows) >= 4, f"only {len(windows)} chaos events"
    assert epochs[0] >= 2, f"only {epochs[0]} epochs under chaos"
    for kind, wid, s, e in windows:
        n = stats.completed_between(s, e)
        assert n > 0, (f"no read() completed while {wid} was down ({kind}, {e - s:.1f}s); "
                       f"calls around it: {stats.around(s, e, s)}")
    assert stats.max_s <= READ_DEADLINE, \
        f"slowest read() {stats.max_s:.3f}s > {READ_DEADLINE}s at {stats.max_at}"
    # Every worker is back in etcd (a frozen one lost its lease and registers again).
    cluster.wait_registered(["w1", "w2", "w3"], timeout=10)
    assert fuse.alive()
    read_all(fuse, lake, names=["big12.bin", "sub/dir/big17.bin"])


# ------------------------------------------------------------------------------------------
# 3. The mount table changes under a running FUSE client
# ------------------------------------------------------------------------------------------

def test_mount_add_and_rm_reach_running_fuse(cluster, lake, tmp_path):
    start_workers(cluster, 2)
    cluster.mount_add(MOUNT, lake.uri)
    fuse = cluster.fuse(metrics=True)
    read_all(fuse, lake, names=["page3.bin"])
    updates = fuse.metric(CLIENT_MOUNT_UPDATES)
    extra = _small_lake(tmp_path, "extra", seed=3)
    target = os.path.join(fuse.mountpoint, "data", "extra", "x1.bin")
    assert not os.path.exists(target)

    cluster.mount_add("/data/extra", extra.uri)
    took = wait_readable(target, extra.files["x1.bin"], timeout=5)
    print(f"\nmount add visible after {took:.2f}s")
    assert sorted(os.listdir(os.path.join(fuse.mountpoint, "data"))) == ["extra", "lake"]
    read_all(fuse, extra, mount="/data/extra")
    assert fuse.metric(CLIENT_MOUNT_UPDATES) > updates

    cluster.mount_rm("/data/extra")
    took = wait_gone(target, timeout=5)
    print(f"mount rm visible after {took:.2f}s")
    wait_until(lambda: sorted(os.listdir(os.path.join(fuse.mountpoint, "data"))) == ["lake"], 5,
               "/data to list only lake")
    # The other mount was never disturbed.
    read_all(fuse, lake, names=["big9.bin", "one.bin"])
    assert fuse.alive()


# ------------------------------------------------------------------------------------------
# 4. etcd dies during reads, then comes back
# ------------------------------------------------------------------------------------------

def _random_range_reader(fuse, lake, names, stats, stop, seed):
    """Random unaligned O_DIRECT ranges of the given files until `stop`; each compared."""
    rng = random.Random(seed)
    fds = {n: os.open(mount_path(fuse, n), os.O_RDONLY | os.O_DIRECT) for n in names}
    try:
        while not stop.is_set():
            name = rng.choice(names)
            data = lake.files[name]
            off = rng.randrange(1, len(data) - 1)
            n = rng.randrange(4 * KiB, 200 * KiB)
            try:
                got = timed_pread(fds[name], n, off, stats, f"{name}@{off}")
                if got != data[off:off + n]:
                    stats.error(f"{name}@{off}+{n}: wrong bytes")
            except OSError as e:
                stats.error(f"{name}@{off}+{n}: {e!r}")
    finally:
        for fd in fds.values():
            os.close(fd)


def test_etcd_outage_during_reads(cluster, lake, tmp_path):
    start_workers(cluster, 3)
    cluster.mount_add(MOUNT, lake.uri)
    warm = [n for n in lake.names(exclude="cold/") if len(lake.files[n]) > 64 * KiB]
    # Warmed through another client: pages in the reading client's own buffer would never
    # reach a worker again.
    warmer = cluster.fuse(name="fuse-warm")
    read_all(warmer, lake, names=warm)
    assert warmer.stop() == 0
    # --no-short-circuit: cached pages are read over TCP, so the reads go on meeting workers.
    fuse = cluster.fuse(extra=["--worker-timeout", f"{WORKER_TIMEOUT:g}s", "--no-short-circuit"],
                        metrics=True)
    ids = ["w1", "w2", "w3"]
    stats, stop = ReadStats(), threading.Event()
    reader = threading.Thread(target=_random_range_reader,
                              args=(fuse, lake, warm, stats, stop, 4), daemon=True)
    reader.start()
    try:
        wait_until(lambda: stats.calls >= 20 or stats.errors, 20, "reads before the kill")
        requests_before = cluster.metric_sum(REQUESTS, ids)
        cluster.etcd.kill()
        t_kill = time.monotonic()

        # The table cannot be changed without etcd: a clear error, not a hang.
        t0 = time.monotonic()
        r = cluster.cli(["mount", "add", "/data/late", "file://" + str(tmp_path)], timeout=30)
        took = time.monotonic() - t0
        assert r.returncode != 0, "mount add succeeded without etcd"
        line = one_error_line(r.stderr)
        print(f"\nmount add without etcd: exit {r.returncode} after {took:.1f}s: {line}")
        assert took < 15, f"mount add took {took:.1f}s to fail"
        # Workers notice (their keep-alives fail) and keep serving.
        wait_until(lambda: all(cluster.metric(w, ETCD_CONNECTED) == 0 for w in ids)
                   and fuse.metric(ETCD_CONNECTED) == 0, 10,
                   "workers and client to report cairn_etcd_connected 0")
        assert fuse.metric(CLIENT_WORKERS) == 3, "the client dropped workers during the outage"
        wait_until(lambda: time.monotonic() - t_kill > 3 or stats.errors, 5, "3 s of outage")
        assert not stats.errors, stats.errors[:10]
        during = stats.completed_between(t_kill, time.monotonic())
        assert during >= 20, f"only {during} reads completed during the etcd outage"
        served = cluster.metric_sum(REQUESTS, ids) - requests_before
        assert served >= during, f"{served} worker requests for {during} reads during the outage"
        assert fuse.alive() and all(cluster.workers[w].alive() for w in ids)

        cluster.etcd.restart()  # Same ports, same data folder.
        wait_until(lambda: all(cluster.metric(w, ETCD_CONNECTED) == 1
                               and cluster.metric(w, REGISTERED) == 1 for w in ids), 10,
                   "workers to reconnect to etcd and be registered")
        cluster.wait_registered(ids, timeout=10)
        wait_until(lambda: fuse.metric(ETCD_CONNECTED) == 1, 10, "the client to reconnect")

        # A worker that joins after the restart gets pages of data nobody read yet.
        w4 = cluster.start_worker("w4")
        wait_until(lambda: fuse.metric(CLIENT_WORKERS) == 4, 5, "w4 in the client's ring")
        cold = lake.names(prefix="cold/")
        t_join = time.monotonic()
        used = False
        for name in cold:
            read_all(fuse, lake, names=[name])
            if metrics_of(w4.metrics_port).get(REQUESTS, 0) > 0:
                used = True
                break
            if time.monotonic() - t_join > 15:
                break
        assert used, (f"w4 (joined after the etcd restart) got no request in "
                      f"{time.monotonic() - t_join:.1f}s of uncached reads")
        print(f"w4 used {time.monotonic() - t_join:.2f}s after joining")

        # A mount added after the restart reaches the running client.
        late = _small_lake(tmp_path, "late", seed=4, count=2)
        cluster.mount_add("/data/late", late.uri)
        wait_readable(os.path.join(fuse.mountpoint, "data", "late", "x0.bin"),
                      late.files["x0.bin"], timeout=5)
        read_all(fuse, late, mount="/data/late")
    finally:
        stop.set()
        reader.join(timeout=30)
    assert not reader.is_alive(), "the reader hung"
    assert not stats.errors, stats.errors[:10]
    print(f"reads: {stats.calls}, max read() {stats.max_s:.3f}s at {stats.max_at}")


# ------------------------------------------------------------------------------------------
# 5. A restarted worker keeps its cached pages
# ------------------------------------------------------------------------------------------

def test_restarted_worker_keeps_cached_pages(cluster, lake):
    start_workers(cluster, 3)
    cluster.mount_add(MOUNT, lake.uri)
    # Over TCP, so that every page a worker serves shows in its hit counter.
    fuse = cluster.fuse(extra=["--no-short-circuit"])
    read_all(fuse, lake)
    total_pages = lake.pages()
    wait_until(lambda: cluster.metric_sum(PAGES) == total_pages, 10,
               f"{total_pages} pages stored (background writes)")
    w2_pages = cluster.metric("w2", PAGES)
    assert w2_pages > 0
    assert cluster.metric_sum(UFS_BYTES) == lake.bytes()
    ufs_others = cluster.metric_sum(UFS_BYTES, ["w1", "w3"])
    assert fuse.stop() == 0

    assert cluster.workers["w2"].stop() == 0  # SIGTERM
    cluster.wait_unregistered("w2", timeout=2)
    w2 = cluster.restart_worker("w2")
    # Page files are recovered in the background: wait for all of them.
    wait_until(lambda: metrics_of(w2.metrics_port).get(PAGES) == w2_pages, 10,
               f"w2 to recover its {w2_pages:.0f} pages")
    # A fresh client: its page buffer is empty, and it sees w2 in the ring from the start.
    fuse2 = cluster.fuse(extra=["--no-short-circuit"], name="fuse2")
    read_all(fuse2, lake)
    m = metrics_of(w2.metrics_port)
    assert m.get(MISSES, 0) == 0, m
    assert m.get(UFS_BYTES, 0) == 0, m
    assert m.get(HITS, 0) >= w2_pages, (m.get(HITS), w2_pages)
    assert cluster.metric_sum(UFS_BYTES, ["w1", "w3"]) == ufs_others, \
        "pages were read from the source again"
    assert cluster.metric_sum(PAGES) == total_pages


# ------------------------------------------------------------------------------------------
# 6. Replicas: losing a worker loses no cached data
# ------------------------------------------------------------------------------------------

PEER_FILLS = "cairn_worker_peer_fills_total"
PEER_FILL_FAILURES = "cairn_worker_peer_fill_failures_total"

# --no-short-circuit: a client on this machine would otherwise read the killed worker's page
# files straight from its cache folder, and never need the replica.
REPLICA_CLIENT = ["--worker-timeout", f"{WORKER_TIMEOUT:g}s", "--no-short-circuit"]


def _replicated_and_killed(cluster, lake):
    """3 workers, the lake mounted with --replicas 2 and read once, every page on two workers;
    then w1 killed with SIGKILL. Returns the source bytes w2 and w3 had read by then."""
    start_workers(cluster, 3)
    cluster.mount_add(MOUNT, lake.uri, "--replicas", "2")
    # No failover while all three live: a read that outlasted a short --worker-timeout on both
    # replicas of a page (a busy CI machine) would go on to the third worker, which keeps a
    # copy too, and the placement checks below would count three.
    fuse = cluster.fuse(extra=["--worker-timeout", "30s", "--no-short-circuit"])
    read_all(fuse, lake)
    total_pages = lake.pages()
    # Replica fills are background work: wait until each page is on two workers.
    wait_until(lambda: cluster.metric_sum(PAGES) >= 2 * total_pages, 15,
               f"{2 * total_pages} stored pages (2 replicas of {total_pages})")
    assert cluster.metric_sum(PAGES) == 2 * total_pages, \
        {w: (cluster.metric(w, PAGES), cluster.metric(w, PEER_FILLS), cluster.metric(w, MISSES))
         for w in cluster.workers}
    # Peer fills: the second replica copied each page from the first, so the source was read
    # once per page, not once per replica.
    fills = cluster.metric_sum(PEER_FILLS)
    failed = cluster.metric_sum(PEER_FILL_FAILURES)
    assert (fills, failed) == (total_pages, 0), (fills, failed, total_pages)
    assert cluster.metric_sum(UFS_BYTES) == lake.bytes()
    assert fuse.stop() == 0
    ufs_live = cluster.metric_sum(UFS_BYTES, ["w2", "w3"])
    cluster.workers["w1"].kill9()
    return ufs_live


def test_replicas_survive_worker_kill(cluster, lake):
    """Re-read while the killed worker is still in the ring (its lease has not run out): the
    client fails over from it to the page's other replica, which has the page."""
    cluster.lease_ttl = 30  # The dead w1 stays in etcd for the whole re-read.
    ufs_live = _replicated_and_killed(cluster, lake)
    fuse2 = cluster.fuse(extra=REPLICA_CLIENT, name="fuse-after-kill")
    read_all(fuse2, lake)
    assert cluster.metric_sum(UFS_BYTES, ["w2", "w3"]) == ufs_live, "re-read went to the source"
    assert "w1" in cluster.etcd.worker_ids(), "w1 left the ring: the test read the other case"


def test_replicas_after_dead_worker_left_ring(cluster, lake):
    """Re-read after the killed worker's lease ran out and the ring has two workers: each
    page's replica set now includes a worker that never had it, and the client must find the
    surviving copy (cache-only lookups on the replicas) instead of reading the source, and the
    replica that lacked it copies it from the one that has it (read repair)."""
    ufs_live = _replicated_and_killed(cluster, lake)
    cluster.wait_unregistered("w1", timeout=LEASE_TTL + 3)
    live = ["w2", "w3"]
    pages0, fills0 = cluster.metric_sum(PAGES, live), cluster.metric_sum(PEER_FILLS, live)
    fuse3 = cluster.fuse(extra=REPLICA_CLIENT, name="fuse-after-lease")
    read_all(fuse3, lake)
    grown = cluster.metric_sum(UFS_BYTES, live) - ufs_live
    assert grown == 0, f"{grown} bytes of {lake.bytes()} read from the source again"
    # Read repair: where the client asked the replica that never had a page first, that replica
    # was told to copy the page from the other one (in the background): each copy is a peer
    # fill, and every stored page came from one.
    def repaired():
        pages = cluster.metric_sum(PAGES, live) - pages0
        fills = cluster.metric_sum(PEER_FILLS, live) - fills0
        return pages > 0 and pages == fills
    wait_until(repaired, 10, "read repair: new pages on w2/w3 equal to their peer fills")
    assert cluster.metric_sum(PEER_FILL_FAILURES, live) == 0
    assert cluster.metric_sum(UFS_BYTES, live) == ufs_live


# ------------------------------------------------------------------------------------------
# 7. Clean shutdown leaves at once, a crash after the lease TTL
# ------------------------------------------------------------------------------------------

def _seconds_until_absent(cluster, wid, t0, timeout):
    """Polls `cairn status --json`; returns when the first poll that showed `wid` gone
    started, relative to t0."""
    while True:
        started = time.monotonic()
        ids = cluster.status_ids()
        if wid not in ids:
            return started - t0
        if started - t0 > timeout:
            raise AssertionError(f"{wid} still listed {started - t0:.2f}s later: {ids}")
        time.sleep(0.05)


def test_worker_leaves_status_on_sigterm_and_crash(cluster):
    start_workers(cluster, 3)
    status = cluster.status()
    assert sorted((w["id"], w["state"]) for w in status["workers"]) == \
        [("w1", "up"), ("w2", "up"), ("w3", "up")], status

    t0 = time.monotonic()
    cluster.workers["w1"].send_signal(signal.SIGTERM)
    gone = _seconds_until_absent(cluster, "w1", t0, timeout=5)
    assert cluster.workers["w1"].wait() == 0
    print(f"\nSIGTERM: gone from status after {gone:.2f}s")
    assert gone <= 1.0, f"w1 listed {gone:.2f}s after SIGTERM"

    t0 = time.monotonic()
    cluster.workers["w2"].kill9()
    gone = _seconds_until_absent(cluster, "w2", t0, timeout=LEASE_TTL + 10)
    print(f"kill -9: gone from status after {gone:.2f}s (lease TTL {LEASE_TTL}s)")
    assert gone <= LEASE_TTL + 2, f"w2 listed {gone:.2f}s after kill -9 (TTL {LEASE_TTL}s)"
    status = cluster.status()
    assert [(w["id"], w["state"]) for w in status["workers"]] == [("w3", "up")], status


# ------------------------------------------------------------------------------------------
# 8. Bad input
# ------------------------------------------------------------------------------------------

def _fails(r, timeout_s, took, must_mention=None):
    assert r.returncode not in (0, None), f"exit 0: {r.stdout!r} {r.stderr!r}"
    assert r.returncode < 128, f"killed by a signal: {r.returncode}"
    line = one_error_line(r.stderr)
    assert took < timeout_s, f"took {took:.1f}s to fail: {line}"
    if must_mention:
        assert must_mention.lower() in line.lower(), line
    return line


def test_bad_input(cluster, lake, tmp_path):
    h = cluster.h
    env = _env_without_etcd()
    dead = f"http://127.0.0.1:{free_port()}"

    def run(args, env=env, timeout=30):
        t0 = time.monotonic()
        r = h.run(args, timeout=timeout, env=env)
        return r, time.monotonic() - t0

    # No etcd at all: neither --etcd nor CAIRN_ETCD.
    r, took = run(["mount", "add", MOUNT, lake.uri])
    print("\nno etcd:", _fails(r, 5, took, must_mention="etcd"))
    # An etcd URL nobody answers.
    r, took = run(["mount", "add", MOUNT, lake.uri, "--etcd", dead])
    print("dead etcd:", _fails(r, 12, took))
    r, took = run(["status", "--etcd", dead])
    print("status, dead etcd:", _fails(r, 10, took))
    r, took = run(["status", "--json", "--etcd", dead])
    _fails(r, 10, took)
    # A worker or a FUSE client with no etcd to read its first state from gives up (after 10 s,
    # docs/cluster.md) with an error; the FUSE client leaves no mount behind. Both at once.
    mp = h.new_mountpoint("dead")
    t0 = time.monotonic()
    starters = [h.spawn("dead-worker", [h.cairn_bin, "worker", "--etcd", dead, "--id", "wd",
                                        "--cache-dir", h.new_dir("cache"), "--cache-size", "64MiB",
                                        "--listen", "127.0.0.1:0", "--metrics-listen", "off"],
                        env=env),
                h.spawn("dead-fuse", [h.cairn_bin, "fuse", mp, "--etcd", dead], env=env)]
    for p in starters:
        rc = p.wait(timeout=30)
        took = time.monotonic() - t0
        text = p.log_text()
        assert rc not in (0, None) and rc < 128, f"{p.name} exited {rc}:\n{text}"
        assert took < 15, f"{p.name} took {took:.1f}s to give up"
        assert not any(m in text for m in CRASH_MARKERS), text
        assert "cairn: error: " in text, text
        print(f"{p.name}: exit {rc} after {took:.1f}s: {text.splitlines()[-1]}")
    assert not is_mounted(mp)

    # CAIRN_ETCD stands for --etcd.
    r, _ = run(["mount", "add", MOUNT, lake.uri], env=dict(env, CAIRN_ETCD=cluster.url))
    assert r.returncode == 0, r.stderr
    table = [MOUNT]

    def paths():
        return [m["path"] for m in cluster.status()["mounts"]]

    # Nested under, or above, an existing mount.
    for nested in (MOUNT + "/sub", "/data"):
        r, took = run(["mount", "add", nested, "file://" + str(tmp_path), "--etcd", cluster.url])
        print(f"nested {nested}:", _fails(r, 10, took))
    # A secret is never stored in etcd.
    r, took = run(["mount", "add", "/s3", "s3://bucket/prefix", "--option", "secret_key=x",
                   "--etcd", cluster.url])
    print("secret:", _fails(r, 10, took, must_mention="secret_key"))
    # The same path again, without --replace.
    other = _small_lake(tmp_path, "other", seed=9, count=1)
    r, took = run(["mount", "add", MOUNT, other.uri, "--etcd", cluster.url])
    print("duplicate:", _fails(r, 10, took, must_mention=MOUNT))
    assert paths() == table
    # Removing a mount that does not exist.
    r, took = run(["mount", "rm", "/nowhere", "--etcd", cluster.url])
    print("rm missing:", _fails(r, 10, took, must_mention="/nowhere"))
    # Nothing of the refused commands reached the table; --replace does replace.
    mounts = cluster.status()["mounts"]
    assert [(m["path"], m["uri"].rstrip("/")) for m in mounts] == [(MOUNT, lake.uri)], mounts
    r, _ = run(["mount", "add", MOUNT, other.uri, "--replace", "--etcd", cluster.url])
    assert r.returncode == 0, r.stderr
    mounts = json.loads(cluster.cli(["mount", "ls", "--json"]).stdout)
    assert [(m["path"], m["uri"].rstrip("/")) for m in mounts] == [(MOUNT, other.uri)], mounts
