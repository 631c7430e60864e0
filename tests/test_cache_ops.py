"""Cache management (issue 4): `cairn load` (preload, progress, resume, bandwidth cap, --verify,
--skip-cached, --replicas) and `cairn free`, against a real etcd and three `cairn worker`s.

Every test gets its own etcd and workers with fresh cache folders (fixtures below), so a cold
cache is cold for that test. Workers' Prometheus counters are the ground truth for what reached
the source: `cairn_worker_bytes_from_ufs_total` (summed over the workers) must match what
`cairn load --json` reports, and a page is never read from the source twice.

FUSE readers here use `--no-short-circuit`: a client on the same machine as a worker would
otherwise read cached page files directly and the workers' hit counters would not move.
"""

import json
import os
import pty
import random
import re
import select
import signal
import subprocess
import time

import pytest

from cluster_util import (etcd, COALESCED, CRASH_MARKERS, HITS, MISSES, PAGES, READ_AHEAD,
                          UFS_BYTES, Cluster, one_error_line)
from conftest import KiB, MiB, free_port, read_whole, wait_until
from lake import Lake, pages_of

LOAD_REQUESTS = "cairn_worker_load_requests_total"
LOADED_PAGES = "cairn_worker_loaded_pages_total"
FREED_PAGES = "cairn_worker_freed_pages_total"
PEER_FILLS = "cairn_worker_peer_fills_total"
MOUNT = "/lake"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+ [A-Z] ")  # spdlog lines
SIZE = r"[\d.]+ (?:B|KiB|MiB|GiB|TiB)"
# One progress line without a terminal (src/cli/cmd_cache.cc ProgressLine): "+" marks totals
# still growing while the listing runs.
PLAIN_PROGRESS = re.compile(
    rf"^\s*(\d+\.\d)%(\+?) (\d+)/(\d+)(\+?) files  ({SIZE})/({SIZE})  ({SIZE})/s  "
    rf"ETA (\S+)  from source (\d+)$")
BAR_FRAME = re.compile(rf"^\x1b\[K\[[=> ]{{24}}\] +(\d+\.\d)%\+? (\d+)/\d+\+? files  {SIZE}/{SIZE}")
SUMMARY = re.compile(
    rf"^loaded (\d+) files, ({SIZE}) in ([\d.]+) s: (\d+) pages loaded \(({SIZE}) from the "
    rf"source\), (\d+) already cached, (\d+) failed$")



# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------



@pytest.fixture
def cluster(etcd, harness):
    """etcd + three workers (w1..w3); `etcd` is torn down after the workers."""
    c = Cluster(harness, etcd, lease_ttl=2, cache_size="512MiB")
    for i in (1, 2, 3):
        c.start_worker(f"w{i}")
    return c


def mixed_lake(tmp_path, seed=4):
    """~32 MiB: empty, 1 B, page boundaries, multi-page files, a folder of small files."""
    rng = random.Random(seed)
    sizes = {"empty.bin": 0, "one.bin": 1, "page-minus-1.bin": MiB - 1, "page1.bin": MiB,
             "page-plus-1.bin": MiB + 1, "page3.bin": 3 * MiB, "big9.bin": 9 * MiB + 123,
             "name with spaces.bin": 2 * MiB + 7, "sub/dir/big12.bin": 12 * MiB + 5}
    for i in range(10):
        sizes[f"sub/small-{i:02d}.txt"] = rng.randrange(1, 5000)
    for i in range(6):
        sizes[f"sub/mid-{i}.bin"] = 300 * KiB + 4099 * i
    return Lake(tmp_path / "lake", {n: rng.randbytes(s) for n, s in sizes.items()})


def uniform_lake(tmp_path, count, size, seed=5, name="uniform"):
    rng = random.Random(seed)
    return Lake(tmp_path / name, {f"d/f{i:03d}.bin": rng.randbytes(size) for i in range(count)})


def ns(path=""):
    """Namespace path of `path` (relative to the lake) for cairn commands."""
    return MOUNT + ("/" + path if path else "")


def cairn_args(cluster, *args):
    return [cluster.h.cairn_bin, *args, "--etcd", cluster.url]


def load_json(cluster, *args, expect_rc=0, timeout=120):
    """Runs `cairn load ... --json`; returns (parsed JSON, seconds of wall time, stderr)."""
    t0 = time.monotonic()
    r = cluster.cli(["load", *args, "--json"], timeout=timeout)
    took = time.monotonic() - t0
    err = r.stderr.decode(errors="replace")
    assert r.returncode == expect_rc, \
        f"cairn load {args} exited {r.returncode} (expected {expect_rc}): {r.stdout!r} {err}"
    for marker in CRASH_MARKERS:
        assert marker not in err, err
    return json.loads(r.stdout), took, err


def free_json(cluster, path):
    r = cluster.cli(["free", path, "--json"])
    assert r.returncode == 0, f"cairn free {path}: {r.returncode} {r.stderr!r}"
    return json.loads(r.stdout)


def worker_sums(cluster, *names):
    return {n: cluster.metric_sum(n) for n in names}


def delta(after, before):
    return {k: after[k] - before[k] for k in after}


def read_everything(fuse, lake, names=None):
    """Reads files whole (O_DIRECT, 1 MiB) through the mount and compares every byte."""
    for name in names or lake.names():
        got = read_whole(os.path.join(fuse.mountpoint, MOUNT.lstrip("/"), name), direct=True)
        assert got == lake.files[name], f"{name}: wrong bytes ({len(got)} read)"


def progress_lines(stderr_text):
    """stderr lines that are not spdlog log lines."""
    return [ln for ln in stderr_text.splitlines() if ln.strip() and not LOG_LINE.match(ln)]


def check_totals(j, lake, names=None):
    names = names if names is not None else list(lake.files)
    assert j["files_total"] == len(names), j
    assert j["files_done"] == len(names), j
    assert j["bytes_total"] == lake.bytes(names), j
    assert j["bytes_done"] == lake.bytes(names), j
    assert j["pages_total"] == lake.pages(names), j
    assert j["pages_done"] == lake.pages(names), j
    assert j["listing_done"] is True and j["cancelled"] is False, j
    assert j["pages_failed"] == 0, j


# ------------------------------------------------------------------------------------------
# 1. Load numbers, then every read is a hit
# ------------------------------------------------------------------------------------------

def test_load_folder_numbers_then_reads_hit_only(cluster, tmp_path):
    """On a --replicas 2 mount, a cold load reads every page from the source once (the first
    replica reads it, the second copies it from the first: a peer fill); a fresh FUSE client
    then reads everything with no source byte and no miss."""
    lake = mixed_lake(tmp_path)
    cluster.mount_add(MOUNT, lake.uri, "--replicas", "2")
    counters = (UFS_BYTES, PAGES, LOAD_REQUESTS, LOADED_PAGES, HITS, MISSES, PEER_FILLS)
    before = worker_sums(cluster, *counters)

    j, _, err = load_json(cluster, ns())
    check_totals(j, lake)
    pages = lake.pages()
    assert pages == sum(pages_of(len(d)) for d in lake.files.values()) and pages > 20
    assert j["pages_loaded"] == pages, j
    assert j["pages_cached_before"] == 0 and j["pages_missing"] == 0, j
    assert j["bytes_from_source"] == lake.bytes(), j
    assert j["missing_files"] == [], j
    assert j["elapsed_seconds"] > 0, j
    assert not progress_lines(err), f"--json printed progress on stderr: {err!r}"

    d = delta(worker_sums(cluster, *counters), before)
    assert d[UFS_BYTES] == lake.bytes(), d
    assert d[PEER_FILLS] == pages, d
    assert d[PAGES] == 2 * pages, d
    assert d[LOAD_REQUESTS] == 2 * pages and d[LOADED_PAGES] == 2 * pages, d
    assert d[HITS] == 0 and d[MISSES] == 0, d  # Loads are not page reads.
    # Every worker got some: the pages are spread over the ring.
    for wid in cluster.workers:
        assert cluster.metric(wid, PAGES) > 0, f"{wid} holds no page"

    # A second load is all "already cached" and reads nothing.
    j2, _, _ = load_json(cluster, ns())
    check_totals(j2, lake)
    assert j2["pages_cached_before"] == pages and j2["pages_loaded"] == 0, j2
    assert j2["bytes_from_source"] == 0, j2

    fuse = cluster.fuse(extra=["--no-short-circuit"])
    before = worker_sums(cluster, *counters)
    read_everything(fuse, lake)
    d = delta(worker_sums(cluster, *counters), before)
    assert d[UFS_BYTES] == 0, f"reads after the load went to the source: {d}"
    assert d[MISSES] == 0, d
    assert d[HITS] >= pages, d
    assert d[PAGES] == 0, d


# ------------------------------------------------------------------------------------------
# 2. Progress output
# ------------------------------------------------------------------------------------------

def test_progress_plain_lines_when_stderr_is_not_a_terminal(cluster, tmp_path):
    lake = uniform_lake(tmp_path, 8, 4 * MiB)  # 32 MiB at 4 MiB/s: about 8 s.
    cluster.mount_add(MOUNT, lake.uri)
    r = cluster.cli(["load", ns(), "--bandwidth", "4MiB"], timeout=60)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, (out, err)
    assert "\r" not in err and "\x1b" not in err, f"terminal control characters: {err!r}"
    lines = progress_lines(err)
    parsed = []
    for ln in lines:
        m = PLAIN_PROGRESS.match(ln)
        assert m, f"not a progress line: {ln!r} (stderr: {err!r})"
        parsed.append(m)
    assert len(parsed) >= 2, f"expected a line every 5 s over ~8 s: {lines}"
    loaded = [int(m.group(10)) for m in parsed]
    done = [int(m.group(3)) for m in parsed]
    assert loaded == sorted(loaded) and done == sorted(done), lines
    assert loaded[-1] > loaded[0], lines
    for m in parsed:
        # The listing runs while pages are sent, so totals may still grow ("+"); without "+"
        # they are final. No ETA before the totals are known.
        growing = m.group(2) == "+"
        assert (m.group(5) == "+") == growing, m.group(0)
        assert int(m.group(4)) <= len(lake.files), m.group(0)
        assert growing or int(m.group(4)) == len(lake.files), m.group(0)
        assert not growing or m.group(9) == "--:--", m.group(0)
    # stdout holds exactly the summary.
    out_lines = out.strip().splitlines()
    assert len(out_lines) == 1, out
    m = SUMMARY.match(out_lines[0])
    assert m, out
    assert int(m.group(1)) == len(lake.files) and m.group(2) == "32.0 MiB", out
    assert int(m.group(4)) == lake.pages() and m.group(5) == "32.0 MiB", out
    assert int(m.group(6)) == 0 and int(m.group(7)) == 0, out
    assert 7.0 <= float(m.group(3)) <= 12.0, f"32 MiB at 4 MiB/s took {m.group(3)} s"


def _run_on_pty(args, timeout):
    """Runs `args` with stderr on a new pseudo-terminal; returns (rc, stdout, terminal bytes)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                         start_new_session=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal is gone.
                    break
                if not data:
                    break
                chunks.append(data)
            elif p.poll() is not None:
                break
        else:
            p.kill()
            raise AssertionError(f"{args} did not finish within {timeout}s")
        out = p.stdout.read()
        rc = p.wait(timeout=10)
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()
    return rc, out.decode(errors="replace"), b"".join(chunks).decode(errors="replace")


def test_progress_bar_on_a_terminal(cluster, tmp_path):
    lake = uniform_lake(tmp_path, 6, 4 * MiB)  # 24 MiB at 8 MiB/s: about 3 s.
    cluster.mount_add(MOUNT, lake.uri)
    rc, out, term = _run_on_pty(cairn_args(cluster, "load", ns(), "--bandwidth", "8MiB"), 60)
    assert rc == 0, (out, term)
    assert SUMMARY.match(out.strip()), out
    # Every update rewrites the line: "\r", erase to end of line, then the bar.
    frames = [f for f in term.replace("\r\n", "\n").split("\r") if f.startswith("\x1b[K")]
    assert len(frames) >= 3, f"expected several bar updates over ~3 s: {term!r}"
    percents, done = [], []
    for f in frames:
        m = BAR_FRAME.match(f)
        assert m, f"not a progress bar: {f!r}"
        percents.append(float(m.group(1)))
        done.append(int(m.group(2)))
    # The percentage may step back while the listing still adds files; files done may not.
    assert done == sorted(done), done
    assert percents[-1] == 100.0 and done[-1] == len(lake.files), \
        f"the last frame is not 100 %: {frames[-1]!r}"
    assert frames[-1].rstrip(" ").endswith("\n"), "the bar line is not ended after the load"
    assert "=" in frames[-1], frames[-1]


# ------------------------------------------------------------------------------------------
# 3. Interrupt and resume
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_load_resumes_without_reading_twice(cluster, tmp_path, sig):
    lake = uniform_lake(tmp_path, 30, 4 * MiB)  # 120 MiB
    total = lake.bytes()
    cluster.mount_add(MOUNT, lake.uri)
    ufs0 = cluster.metric_sum(UFS_BYTES)

    p = subprocess.Popen(cairn_args(cluster, "load", ns(), "--bandwidth", "20MiB", "--json"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        # Interrupt once some pages are in (about 2 s at 20 MiB/s).
        wait_until(lambda: cluster.metric_sum(UFS_BYTES) - ufs0 >= 30 * MiB, 20,
                   "30 MiB loaded", interval=0.05)
        p.send_signal(sig)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = err.decode(errors="replace")
    assert p.returncode == 130, f"exit {p.returncode}: {out!r} {err}"
    assert "interrupted" in err and "resume" in err, err
    j1 = json.loads(out)
    assert j1["cancelled"] is True and j1["listing_done"] is False, j1
    assert j1["pages_failed"] == 0, j1
    ufs1 = cluster.metric_sum(UFS_BYTES) - ufs0
    # Requests in flight finished before the command exited: nothing more arrives.
    time.sleep(0.5)
    assert cluster.metric_sum(UFS_BYTES) - ufs0 == ufs1
    assert j1["bytes_from_source"] == ufs1, (j1, ufs1)
    assert 0 < ufs1 < total * 0.8, f"{ufs1} of {total} bytes before the interrupt"

    j2, _, _ = load_json(cluster, ns())
    check_totals(j2, lake)
    assert j2["pages_cached_before"] == ufs1 // MiB > 0, (j2, ufs1)
    assert j2["pages_cached_before"] + j2["pages_loaded"] == lake.pages(), j2
    ufs2 = cluster.metric_sum(UFS_BYTES) - ufs0 - ufs1
    assert j2["bytes_from_source"] == ufs2, (j2, ufs2)
    assert ufs1 + ufs2 == total, f"source bytes over both runs {ufs1} + {ufs2} != {total}"
    r = cluster.cli(["load", ns(), "--verify"])
    assert r.returncode == 0, r.stdout


# ------------------------------------------------------------------------------------------
# 4. Bandwidth cap
# ------------------------------------------------------------------------------------------

def test_bandwidth_cap_holds_over_ten_seconds(cluster, tmp_path):
    cap = 8 * MiB
    lake = uniform_lake(tmp_path, 24, 4 * MiB)  # 96 MiB: about 12 s at the cap.
    cluster.mount_add(MOUNT, lake.uri)
    ufs0 = cluster.metric_sum(UFS_BYTES)
    samples = []  # (seconds since start, source bytes so far)
    t0 = time.monotonic()
    p = subprocess.Popen(cairn_args(cluster, "load", ns(), "--bandwidth", "8MiB", "--json"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        while p.poll() is None and time.monotonic() - t0 < 60:
            samples.append((time.monotonic() - t0, cluster.metric_sum(UFS_BYTES) - ufs0))
            time.sleep(0.25)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    wall = time.monotonic() - t0
    assert p.returncode == 0, (out, err)
    j = json.loads(out)
    check_totals(j, lake)
    ufs = cluster.metric_sum(UFS_BYTES) - ufs0
    assert j["bytes_from_source"] == ufs == lake.bytes(), (j, ufs)
    elapsed = j["elapsed_seconds"]
    assert elapsed >= 10, f"the load took {elapsed:.1f}s; the check needs >= 10 s"
    rate = j["bytes_from_source"] / elapsed
    rate_wall = ufs / wall  # The workers' counters over this test's own clock.
    print(f"\ncap {cap / MiB:.1f} MiB/s: --json {rate / MiB:.2f} MiB/s over {elapsed:.2f}s, "
          f"worker counters {rate_wall / MiB:.2f} MiB/s over {wall:.2f}s")
    assert 0.90 * cap <= rate <= 1.10 * cap, f"{rate / MiB:.2f} MiB/s against a cap of 8 MiB/s"
    assert 0.90 * cap <= rate_wall <= 1.10 * cap, f"{rate_wall / MiB:.2f} MiB/s (worker metrics)"
    # No burst: over any window of >= 4 s the workers stay under the cap (+ a 2 MiB allowance:
    # the token bucket's 1 MiB burst and one page of counter granularity).
    worst = 0.0
    for i, (ta, ba) in enumerate(samples):
        for tb, bb in samples[i + 1:]:
            if tb - ta >= 4.0:
                worst = max(worst, (bb - ba - 2 * MiB) / (tb - ta))
    assert worst <= 1.10 * cap, f"a 4 s window ran at {worst / MiB:.2f} MiB/s (+2 MiB)"


def test_parallelism_limit_does_not_pace_the_load(cluster, tmp_path):
    """With --parallelism 1 every page waits for the previous one; a page of a local file loads
    in milliseconds, so 20 pages must take well under 20 x 250 ms. (A walker that sleeps a
    fixed 250 ms whenever the in-flight limit is reached, instead of waking when a request
    completes, loads parallelism pages per 250 ms: 4 MiB/s here, 128 MiB/s at the default 32.)"""
    lake = uniform_lake(tmp_path, 20, MiB)
    cluster.mount_add(MOUNT, lake.uri)
    j, took, _ = load_json(cluster, ns(), "--parallelism", "1")
    check_totals(j, lake)
    assert j["pages_loaded"] == 20, j
    print(f"\n20 pages with --parallelism 1: {j['elapsed_seconds']:.2f}s")
    assert j["elapsed_seconds"] < 2.5, \
        f"20 one-page loads one at a time took {j['elapsed_seconds']:.2f}s (~250 ms per page)"


# ------------------------------------------------------------------------------------------
# 5. --verify, --skip-cached, --replicas
# ------------------------------------------------------------------------------------------

def test_verify_and_skip_cached(cluster, tmp_path):
    lake = mixed_lake(tmp_path, seed=6)
    cluster.mount_add(MOUNT, lake.uri)
    ufs0 = cluster.metric_sum(UFS_BYTES)

    # Cold: every non-empty file is reported, nothing is loaded.
    r = cluster.cli(["load", ns(), "--verify"])
    out = r.stdout.decode()
    assert r.returncode == 1, out
    assert out.splitlines()[0] == \
        f"{len(lake.files)} files, {lake.pages()} pages, {lake.pages()} not cached", out
    listed = sorted(ln[len("not cached: "):] for ln in out.splitlines()
                    if ln.startswith("not cached: "))
    assert listed == sorted(ns(n) for n in lake.nonempty()), out
    j, _, _ = load_json(cluster, ns(), "--verify", expect_rc=1)
    assert j["pages_missing"] == lake.pages() and j["pages_loaded"] == 0, j
    assert sorted(j["missing_files"]) == listed, j
    assert cluster.metric_sum(UFS_BYTES) == ufs0, "--verify read from the source"
    assert cluster.metric_sum(PAGES) == 0, "--verify cached pages"

    load_json(cluster, ns())
    r = cluster.cli(["load", ns(), "--verify"])
    out = r.stdout.decode()
    assert r.returncode == 0, out
    assert out.strip() == f"{len(lake.files)} files, {lake.pages()} pages, 0 not cached", out
    j, _, _ = load_json(cluster, ns(), "--verify")
    assert j["pages_missing"] == 0 and j["missing_files"] == [], j

    # --skip-cached: only the pages that are missing get a load request.
    gone = "sub/dir/big12.bin"
    assert free_json(cluster, ns(gone))["pages_dropped"] == lake.pages([gone])
    before = worker_sums(cluster, LOAD_REQUESTS, UFS_BYTES)
    j, _, _ = load_json(cluster, ns(), "--skip-cached")
    check_totals(j, lake)
    assert j["pages_loaded"] == lake.pages([gone]), j
    assert j["pages_cached_before"] == lake.pages() - lake.pages([gone]), j
    d = delta(worker_sums(cluster, LOAD_REQUESTS, UFS_BYTES), before)
    assert d[LOAD_REQUESTS] == lake.pages([gone]), f"--skip-cached sent loads for cached pages: {d}"
    assert d[UFS_BYTES] == len(lake.files[gone]), d
    # Without it, every page gets a load request (cached ones count as used), none reads.
    before = worker_sums(cluster, LOAD_REQUESTS, UFS_BYTES)
    j, _, _ = load_json(cluster, ns())
    d = delta(worker_sums(cluster, LOAD_REQUESTS, UFS_BYTES), before)
    assert d[LOAD_REQUESTS] == lake.pages() and d[UFS_BYTES] == 0, d
    assert j["pages_cached_before"] == lake.pages(), j


def test_no_peer_fill_workers_read_the_source_once_per_replica(etcd, harness, tmp_path):
    """`cairn worker --no-peer-fill` ignores PEER hints: a replicated load then costs one
    source read per replica (the behaviour before peer fills, kept as a way out), and the load
    reports it."""
    c = Cluster(harness, etcd, lease_ttl=2, cache_size="128MiB")
    for i in (1, 2, 3):
        c.start_worker(f"n{i}", extra=["--no-peer-fill"])
    lake = uniform_lake(tmp_path, 4, 2 * MiB + 5)
    c.mount_add(MOUNT, lake.uri, "--replicas", "3")
    j, _, _ = load_json(c, ns())
    check_totals(j, lake)
    assert j["bytes_from_source"] == 3 * lake.bytes(), j
    assert c.metric_sum(UFS_BYTES) == 3 * lake.bytes()
    assert c.metric_sum(PEER_FILLS) == 0
    assert c.metric_sum(PAGES) == 3 * lake.pages()


def test_replicas_flag_then_free_file_and_folder(cluster, tmp_path):
    """--replicas 2 on a replicas-1 mount puts every page on two workers; `free` drops every
    copy; --verify then names exactly the freed files; a read after free refetches."""
    lake = mixed_lake(tmp_path, seed=7)
    cluster.mount_add(MOUNT, lake.uri)  # replicas 1
    pages = lake.pages()

    j, _, _ = load_json(cluster, ns(), "--replicas", "2")
    check_totals(j, lake)
    assert j["pages_loaded"] == pages and j["bytes_from_source"] == lake.bytes(), j
    assert cluster.metric_sum(PAGES) == 2 * pages
    assert load_json(cluster, ns(), "--verify", "--replicas", "2")[0]["pages_missing"] == 0

    # Free one file: both copies of each of its pages.
    one = "big9.bin"
    before = worker_sums(cluster, PAGES, FREED_PAGES)
    f = free_json(cluster, ns(one))
    assert f == {"files": 1, "pages_dropped": 2 * lake.pages([one]), "failures": 0}, f
    d = delta(worker_sums(cluster, PAGES, FREED_PAGES), before)
    assert d[PAGES] == -2 * lake.pages([one]) and d[FREED_PAGES] == 2 * lake.pages([one]), d
    r = cluster.cli(["free", ns(one)])
    assert r.returncode == 0 and r.stdout.decode().strip() == \
        "freed 0 cached pages of 1 files", r.stdout  # Nothing left to drop.
    j, _, _ = load_json(cluster, ns(), "--verify", "--replicas", "2", expect_rc=1)
    assert j["missing_files"] == [ns(one)], j
    assert j["pages_missing"] == lake.pages([one]), j

    # Free a folder.
    sub = lake.names("sub/")
    f = free_json(cluster, ns("sub"))
    assert f == {"files": len(sub), "pages_dropped": 2 * lake.pages(sub), "failures": 0}, f
    assert cluster.metric_sum(PAGES) == 2 * (pages - lake.pages([one]) - lake.pages(sub))
    j, _, _ = load_json(cluster, ns(), "--verify", expect_rc=1)
    assert sorted(j["missing_files"]) == sorted(ns(n) for n in [one] + lake.nonempty(sub)), j

    # Reading a freed file goes to the source again (and returns the right bytes); a file
    # that was not freed is still a hit.
    fuse = cluster.fuse(extra=["--no-short-circuit"])
    before = worker_sums(cluster, UFS_BYTES, MISSES, COALESCED, READ_AHEAD)
    read_everything(fuse, lake, [one, "sub/dir/big12.bin"])
    d = delta(worker_sums(cluster, UFS_BYTES, MISSES, COALESCED, READ_AHEAD), before)
    refetched = len(lake.files[one]) + len(lake.files["sub/dir/big12.bin"])
    assert d[UFS_BYTES] == refetched, d
    # One fetch per page: its own miss's, or read ahead by the miss of the page before (a
    # readahead and a read of the same page may meet: coalesced).
    assert d[MISSES] - d[COALESCED] + d[READ_AHEAD] == lake.pages([one, "sub/dir/big12.bin"]), d
    before = worker_sums(cluster, UFS_BYTES)
    read_everything(fuse, lake, ["page3.bin", "name with spaces.bin"])
    assert delta(worker_sums(cluster, UFS_BYTES), before)[UFS_BYTES] == 0


# ------------------------------------------------------------------------------------------
# 6. Bad input
# ------------------------------------------------------------------------------------------

def _fails_with_one_line(r, took, limit_s, *mentions):
    assert r.returncode == 1, f"exit {r.returncode}: {r.stdout!r} {r.stderr!r}"
    line = one_error_line(r.stderr)
    assert took < limit_s, f"took {took:.1f}s: {line}"
    for m in mentions:
        assert m.lower() in line.lower(), line
    assert r.stdout == b"", r.stdout
    return line


def test_bad_input(cluster, tmp_path):
    lake = uniform_lake(tmp_path, 2, MiB)
    cluster.mount_add(MOUNT, lake.uri)
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_ETCD"}

    def run(args, env=env, timeout=30):
        t0 = time.monotonic()
        r = cluster.h.run(args, timeout=timeout, env=env)
        return r, time.monotonic() - t0

    url = ["--etcd", cluster.url]
    # A missing path, inside a mount and outside every mount; a relative path.
    for cmd in ("load", "free"):
        r, took = run([cmd, ns("nope.bin"), *url])
        _fails_with_one_line(r, took, 10, "nope.bin")
    r, took = run(["load", "/elsewhere/x", *url])
    _fails_with_one_line(r, took, 10, "/elsewhere/x")
    r, took = run(["load", "relative/x", *url])
    _fails_with_one_line(r, took, 10, "absolute")
    # Bandwidth that is not a size, or zero.
    r, took = run(["load", ns(), "--bandwidth", "abc", *url])
    _fails_with_one_line(r, took, 10, "--bandwidth", "abc")
    r, took = run(["load", ns(), "--bandwidth", "0", *url])
    _fails_with_one_line(r, took, 10, "--bandwidth")
    # No etcd at all (neither --etcd nor CAIRN_ETCD): nothing to load into.
    for cmd in ("load", "free", "invalidate"):
        r, took = run([cmd, ns()])
        _fails_with_one_line(r, took, 5, "etcd")
    # An etcd nobody answers: gives up within its 10 s deadline with an error, no crash.
    dead = f"http://127.0.0.1:{free_port()}"
    r, took = run(["load", ns(), "--etcd", dead])
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and took < 15, (r.returncode, took, err)
    assert not any(m in err for m in CRASH_MARKERS), err
    assert err.strip().splitlines()[-1].startswith("cairn: error: ") and "etcd" in \
        err.strip().splitlines()[-1], err
    # Nothing of the above loaded anything; a good command still works.
    assert cluster.metric_sum(PAGES) == 0
    j, _, _ = load_json(cluster, ns())
    assert j["pages_loaded"] == 2, j
