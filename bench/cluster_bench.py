#!/usr/bin/python3
"""Cairn cluster benchmark: several `cairn worker` processes registered in a private etcd,
read through one `cairn fuse` client, all on this machine.

Measures (a) warm aggregate read throughput with 1, 2 and 3 workers (median of --runs each; the
issue's target: 3 workers within 15 % of 1 worker), (b) the time from a worker's kill -9 (and,
for comparison, SIGSTOP) to the first successful read of a page that worker owned, and (c) the
fraction of pages that move when a 4th worker joins 3 (ideal 1/4 with rendezvous hashing).

A benchmark, not a test: it prints the numbers, the ratio against its target and PASS/MISS,
and writes every raw value to a JSON file. It fails (exit 1) only if a read returns wrong bytes
or a process misbehaves. Run with Debian's interpreter (it has pytest, which tests/conftest.py,
reused here, imports):

    /usr/bin/python3 bench/cluster_bench.py [--size-mib 256] [--out FILE.json]

See docs/benchmarks.md ("Cluster benchmark") for what each number means and a recorded run.
"""
import argparse
import hashlib
import mmap
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import Harness, wait_until  # noqa: E402
from cluster_util import (MISSES, PAGES, REQUESTS, UFS_BYTES, Cluster, Etcd,  # noqa: E402
                          metrics_of)
from readbench import runner  # noqa: E402
from readbench.runner import log  # noqa: E402

MIB = 1 << 20
PAGE = MIB
MOUNT = "/bench"
TARGET_RATIO = 0.85  # 3 workers within 15 % of 1 worker.
MODES = {"tcp": ["--no-short-circuit"], "short-circuit": []}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=256, help="dataset size (default 256)")
    p.add_argument("--file-mib", type=int, default=16, help="size of each file (default 16)")
    p.add_argument("--readers", type=int, default=4, help="reader threads (default 4)")
    p.add_argument("--runs", type=int, default=3, help="measured runs per setup (median)")
    p.add_argument("--kill-samples", type=int, default=5, help="samples of (b) per signal")
    p.add_argument("--worker-timeout", default="1s", help="client --worker-timeout (default 1s)")
    p.add_argument("--modes", default="tcp,short-circuit",
                   help="client transports for (a): tcp (--no-short-circuit), short-circuit")
    p.add_argument("--drop-caches", action="store_true",
                   help="drop the kernel page cache before each measured run (root)")
    p.add_argument("--workdir-base", default=tempfile.gettempdir())
    p.add_argument("--keep-workdir", action="store_true")
    p.add_argument("--out", help="JSON file (default bench/results/cluster-<time>.json)")
    a = p.parse_args(argv)
    a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if any(m not in MODES for m in a.modes) or not a.modes:
        p.error(f"--modes: choose from {', '.join(MODES)}")
    if a.size_mib < a.file_mib or a.file_mib < 1 or a.runs < 1 or a.readers < 1:
        p.error("need --size-mib >= --file-mib >= 1, --runs >= 1, --readers >= 1")
    return a


class Bench:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.src = os.path.join(workdir, "src")
        self.files = {}  # name -> size
        self.sha = {}
        self.etcd = None
        self.harness = None
        self.cluster = None
        self.results = {}

    # -- setup --------------------------------------------------------------------------
    def make_dataset(self):
        os.makedirs(self.src)
        n = self.args.size_mib // self.args.file_mib
        chunk = self.args.file_mib * MIB
        for i in range(n):
            name = f"f{i:03d}.bin"
            data = os.urandom(chunk)
            with open(os.path.join(self.src, name), "wb") as f:
                f.write(data)
            self.files[name] = len(data)
            self.sha[name] = hashlib.sha256(data).hexdigest()
        self.total_bytes = sum(self.files.values())
        self.total_pages = sum((s + PAGE - 1) // PAGE for s in self.files.values())

    def start(self):
        # Each worker can hold the whole dataset (the 1-worker case), with room to spare.
        self.start_etcd_and_harness(cache_mib=int(self.args.size_mib * 1.25) + 64)
        self.cluster.mount_add(MOUNT, "file://" + self.src)

    def start_etcd_and_harness(self, cache_mib):
        self.etcd = Etcd(os.path.join(self.workdir, "etcd")).start()
        self.harness = Harness(os.path.abspath(self.args.cairn_bin),
                               os.path.join(self.workdir, "h"))
        self.cluster = Cluster(self.harness, self.etcd, lease_ttl=2,
                               cache_size=f"{cache_mib}MiB")

    def cleanup(self):
        if self.harness is not None:
            for p in self.cluster.workers.values() if self.cluster else ():
                if p.alive():
                    os.kill(p.pid, signal.SIGCONT)
            errors = self.harness.cleanup()
            if errors:
                log(f"cleanup problems: {errors}")
            self.harness = None
        if self.etcd is not None:
            self.etcd.stop()
            self.etcd = None

    # -- helpers --------------------------------------------------------------------------
    def path(self, fuse, name):
        return os.path.join(fuse.mountpoint, MOUNT.lstrip("/"), name)

    def fuse(self, flags, name):
        return self.cluster.fuse(extra=["--worker-timeout", self.args.worker_timeout, *flags],
                                 name=name)

    def drop_caches(self):
        if self.args.drop_caches:
            subprocess.run(["sync"], check=True)
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")

    def read_all(self, fuse):
        """Reads every file whole with `readers` threads, O_DIRECT 1 MiB reads into a reused
        page-aligned buffer. Returns (seconds, bytes)."""
        q = queue.Queue()
        names = sorted(self.files)
        random.Random(7).shuffle(names)
        for n in names:
            q.put(n)
        done, errors = [0], []
        lock = threading.Lock()

        def reader():
            buf = mmap.mmap(-1, MIB)
            while True:
                try:
                    name = q.get_nowait()
                except queue.Empty:
                    return
                try:
                    fd = os.open(self.path(fuse, name), os.O_RDONLY | os.O_DIRECT)
                    try:
                        off = 0
                        while True:
                            n = os.preadv(fd, [buf], off)
                            if n == 0:
                                break
                            off += n
                    finally:
                        os.close(fd)
                    if off != self.files[name]:
                        raise IOError(f"{name}: {off} bytes read, {self.files[name]} expected")
                    with lock:
                        done[0] += off
                except Exception as e:
                    with lock:
                        errors.append(repr(e))
                    return

        threads = [threading.Thread(target=reader) for _ in range(self.args.readers)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        if errors:
            raise RuntimeError(f"read errors: {errors[:5]}")
        return took, done[0]

    def check_sample(self, fuse, k):
        """Hashes one file (rotating) through the mount; outside the timed part."""
        name = sorted(self.files)[k % len(self.files)]
        with open(self.path(fuse, name), "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != self.sha[name]:
            raise RuntimeError(f"{name}: wrong bytes through the mount")

    def counters(self, ids):
        out = {}
        for wid in ids:
            m = metrics_of(self.cluster.workers[wid].metrics_port)
            out[wid] = {k: m.get(k, 0.0) for k in (REQUESTS, MISSES, UFS_BYTES, PAGES)}
        return out

    def wait_stored(self, wid, timeout=60):
        """Waits until worker `wid` has stored every page it missed (writes are background)."""
        def stored():
            c = self.counters([wid])[wid]
            return c[PAGES] >= c[MISSES]
        wait_until(stored, timeout, f"{wid} to store its pages", interval=0.1)

    # -- (a) throughput -------------------------------------------------------------------
    def set_ring(self, k):
        """Exactly workers w1..wk running and registered. A stopped worker (SIGTERM) keeps its
        cache folder; started again with the same id it owns the same pages, all still cached
        (the wait below covers the background recovery of its page files)."""
        for i in (1, 2, 3):
            wid = f"w{i}"
            p = self.cluster.workers.get(wid)
            if i > k and p is not None and p.alive():
                self.stored_pages[wid] = self.counters([wid])[wid][PAGES]
                p.stop()
                self.cluster.wait_unregistered(wid, timeout=5)
        for i in range(1, k + 1):
            wid = f"w{i}"
            p = self.cluster.workers.get(wid)
            if p is None:
                self.cluster.start_worker(wid)
            elif not p.alive():
                self.cluster.restart_worker(wid)
                want = self.stored_pages.get(wid, 0)
                wait_until(lambda: self.counters([wid])[wid][PAGES] >= want, 30,
                           f"{wid} to recover {want:.0f} pages", interval=0.05)

    def measure(self, k, mode, r):
        ids = [f"w{i}" for i in range(1, k + 1)]
        before = self.counters(ids)
        fuse = self.fuse(MODES[mode], f"{mode}-{k}w-{r}")
        self.drop_caches()
        took, n = self.read_all(fuse)
        self.check_sample(fuse, r)
        fuse.stop()
        after = self.counters(ids)
        misses = sum(after[w][MISSES] - before[w][MISSES] for w in ids)
        reqs = {w: int(after[w][REQUESTS] - before[w][REQUESTS]) for w in ids}
        mbps = n / took / 1e6
        log(f"  {k} worker(s) {mode:13s} run {r + 1}: {mbps:7.0f} MB/s "
            f"({took:.2f} s; misses {misses:.0f}; requests {reqs})")
        return {"seconds": took, "bytes": n, "MBps": mbps, "misses": misses, "requests": reqs}

    def throughput(self):
        self.stored_pages = {}
        # Warm-up: each new worker fills the pages it owns in the k-worker ring, once.
        for k in (1, 2, 3):
            self.set_ring(k)
            fuse = self.fuse(MODES["tcp"], f"warmup{k}")
            took, n = self.read_all(fuse)
            fuse.stop()
            self.wait_stored(f"w{k}")
            log(f"  {k} worker(s): warm-up (cold for w{k}'s pages) {n / took / 1e6:.0f} MB/s")
        # Measured runs, interleaved (round r: 1, 2, 3 workers, then the next round) so that
        # the load of this shared machine drifting over time does not favour one setup.
        runs = {m: {k: [] for k in (1, 2, 3)} for m in self.args.modes}
        for r in range(self.args.runs):
            for k in (1, 2, 3):
                self.set_ring(k)
                for mode in self.args.modes:
                    runs[mode][k].append(self.measure(k, mode, r))
        res = {}
        for mode in self.args.modes:
            res[mode] = {k: {"runs": runs[mode][k],
                             "median_MBps": statistics.median(x["MBps"] for x in runs[mode][k])}
                         for k in (1, 2, 3)}
            res[mode]["ratio_3w_1w"] = res[mode][3]["median_MBps"] / res[mode][1]["median_MBps"]
            res[mode]["pass"] = res[mode]["ratio_3w_1w"] >= TARGET_RATIO
            res[mode]["cold_misses"] = sum(x["misses"] for k in (1, 2, 3) for x in runs[mode][k])
        self.results["throughput"] = res
        self.set_ring(3)

    # -- (b) failover ---------------------------------------------------------------------
    def owner_map(self, ids, label):
        """{(file, page): worker id} as the current ring places pages, found by asking: a
        fresh client reads 4 KiB inside each page (not a whole page and not sequential, so it
        is one request to the page's owner and no readahead) and the worker whose request
        counter moved owns the page. Page files in a cache folder are no guide: a worker keeps
        the pages it cached under earlier, smaller rings."""
        fuse = self.fuse(MODES["tcp"], f"owners-{label}")
        owners = {}
        last = {w: c[REQUESTS] for w, c in self.counters(ids).items()}
        try:
            for name in sorted(self.files):
                fd = os.open(self.path(fuse, name), os.O_RDONLY | os.O_DIRECT)
                try:
                    for page in range((self.files[name] + PAGE - 1) // PAGE):
                        os.pread(fd, 4096, page * PAGE + 4096)
                        now = {w: c[REQUESTS] for w, c in self.counters(ids).items()}
                        moved = [w for w in ids if now[w] > last[w]]
                        last = now
                        if len(moved) != 1:
                            raise RuntimeError(f"page {page} of {name}: requests on {moved}")
                        owners[(name, page)] = moved[0]
                finally:
                    os.close(fd)
        finally:
            fuse.stop()
        return owners

    def read_page(self, fuse, name, page):
        fd = os.open(self.path(fuse, name), os.O_RDONLY | os.O_DIRECT)
        try:
            return os.pread(fd, PAGE, page * PAGE)
        finally:
            os.close(fd)

    def expected_page(self, name, page):
        with open(os.path.join(self.src, name), "rb") as f:
            f.seek(page * PAGE)
            return f.read(PAGE)

    def failover(self):
        res = {}
        ids = ["w1", "w2", "w3"]
        rng = random.Random(11)
        owners = self.owner_map(ids, "3w")
        self.owners_3w = owners
        for kind in ("kill9", "sigstop"):
            samples = []
            for i in range(self.args.kill_samples):
                victim = ids[i % 3]
                pages = sorted(k for k, w in owners.items() if w == victim)
                if len(pages) < 2:
                    raise RuntimeError(f"{victim} owns only {len(pages)} pages")
                warm_page, probe = rng.sample(pages, 2)
                fuse = self.fuse(MODES["tcp"], f"failover-{kind}-{i}")
                # An open connection to the victim first, as a busy client has.
                if self.read_page(fuse, *warm_page) != self.expected_page(*warm_page):
                    raise RuntimeError("wrong bytes before the failure")
                proc = self.cluster.workers[victim]
                errors = 0
                t0 = time.monotonic()
                if kind == "kill9":
                    proc.kill9()
                else:
                    os.kill(proc.pid, signal.SIGSTOP)
                try:
                    while True:
                        try:
                            got = self.read_page(fuse, *probe)
                            break
                        except OSError:
                            errors += 1
                            if time.monotonic() - t0 > 30:
                                raise
                    took = time.monotonic() - t0
                finally:
                    if kind == "sigstop":
                        os.kill(proc.pid, signal.SIGCONT)
                if got != self.expected_page(*probe):
                    raise RuntimeError(f"wrong bytes after {kind} of {victim}")
                fuse.stop()
                samples.append({"worker": victim, "page": list(probe), "seconds": took,
                                "errors": errors})
                log(f"  {kind} {victim}: first good read of its page after "
                    f"{took * 1000:.0f} ms ({errors} failed reads)")
                if kind == "kill9":
                    self.cluster.restart_worker(victim)
                else:
                    # Its lease may run out just after SIGCONT (keep-alives were due while it
                    # was frozen); give it a TTL to lose it and register again.
                    time.sleep(self.cluster.lease_ttl + 0.5)
                    self.cluster.wait_registered([victim], timeout=15)
            res[kind] = {"samples": samples,
                         "median_s": statistics.median(s["seconds"] for s in samples)}
        self.results["failover"] = res

    # -- (c) pages moved by a 4th worker --------------------------------------------------
    def join(self):
        ids = ["w1", "w2", "w3"]
        # Every page cached under the 3-worker ring (failover reads in (b) left extra copies
        # on runner-up workers; they change nothing below).
        fuse = self.fuse(MODES["tcp"], "join-before")
        self.read_all(fuse)
        fuse.stop()
        before = self.counters(ids)
        self.cluster.start_worker("w4")
        fuse = self.fuse(MODES["tcp"], "join-after")
        self.read_all(fuse)
        self.check_sample(fuse, 1)
        fuse.stop()
        self.wait_stored("w4")
        after = self.counters(ids + ["w4"])
        w4 = after["w4"]
        old_misses = sum(after[w][MISSES] - before[w][MISSES] for w in ids)
        # The exact placement before and after, by asking the ring (see owner_map).
        owners_4w = self.owner_map(ids + ["w4"], "4w")
        moved = [k for k in owners_4w if owners_4w[k] != self.owners_3w[k]]
        between_old = [k for k in moved if owners_4w[k] != "w4"]
        n = self.total_pages
        self.results["join"] = {
            "total_pages": n,
            "w4_misses": w4[MISSES], "w4_pages": w4[PAGES], "w4_requests": w4[REQUESTS],
            "old_workers_misses": old_misses,
            "moved_pages": len(moved), "moved_between_old_workers": len(between_old),
            "moved_fraction": len(moved) / n, "ideal": 0.25,
            # Binomial sampling noise of the fraction with n pages.
            "sigma": (0.25 * 0.75 / n) ** 0.5}
        log(f"  w4 joined: {len(moved)} of {n} pages moved ({len(between_old)} between old "
            f"workers); w4 stored {w4[PAGES]:.0f} pages ({w4[MISSES]:.0f} misses); old "
            f"workers' misses {old_misses:.0f}")


def machine():
    info = {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_total"] = f.readline().split(":")[1].strip()
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def report(b, args):
    r = b.results
    lines = []
    t = r.get("throughput", {})
    for mode, res in t.items():
        lines.append(f"(a) warm throughput, {mode}, {args.readers} readers, O_DIRECT 1 MiB reads, "
                     f"{args.size_mib} MiB (median of {args.runs}):")
        lines.append("    workers   MB/s    runs")
        for k in (1, 2, 3):
            runs = " ".join(f"{x['MBps']:.0f}" for x in res[k]["runs"])
            lines.append(f"    {k:7d} {res[k]['median_MBps']:7.0f}    {runs}")
        lines.append(f"    3w/1w = {res['ratio_3w_1w']:.3f} (target >= {TARGET_RATIO}): "
                     f"{'PASS' if res['pass'] else 'MISS'}; misses during measured runs: "
                     f"{res['cold_misses']:.0f} (0 = all warm)")
    f = r.get("failover", {})
    for kind, res in f.items():
        ms = " ".join(f"{s['seconds'] * 1000:.0f}" for s in res["samples"])
        lines.append(f"(b) {kind} -> first good read of an owned page: median "
                     f"{res['median_s'] * 1000:.0f} ms (samples ms: {ms}; "
                     f"--worker-timeout {args.worker_timeout})")
    j = r.get("join")
    if j:
        lines.append(f"(c) 4th worker joins: {j['moved_fraction']:.3f} of pages moved "
                     f"({j['moved_pages']}/{j['total_pages']}; ideal 0.25, sampling sigma "
                     f"{j['sigma']:.3f}); all to w4: "
                     f"{'yes' if j['moved_between_old_workers'] == 0 else 'NO'}; w4 misses "
                     f"{j['w4_misses']:.0f}, old workers' misses {j['old_workers_misses']:.0f} "
                     f"(ideal 0)")
    return lines


def main(argv):
    args = parse_args(argv)
    workdir = runner.make_workdir(args, "cairn-cluster-bench-")
    if workdir is None:
        return 2
    b = Bench(args, workdir)

    def body():
        log(f"workdir {workdir}; dataset {args.size_mib} MiB in {args.file_mib} MiB files")
        b.make_dataset()
        b.start()
        log("(a) throughput")
        b.throughput()
        log("(b) failover")
        b.failover()
        log("(c) join")
        b.join()

    return runner.run("cluster", args, workdir, b, body, lambda: report(b, args), machine(),
                      lambda: b.harness.procs if b.harness else [], lambda: b.results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
