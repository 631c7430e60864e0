#!/usr/bin/python3
"""Preload benchmark: how long `cairn load` takes to bring a dataset of 1 MiB files into the
cache, against reading the same dataset once, cold, through a `cairn fuse` mount (one
sequential `cat`-like reader over every file, and 8 reader threads), and what a read costs
once the dataset is preloaded.

Cluster mode on this machine: a private etcd, --workers `cairn worker` processes, one
`cairn fuse --etcd` client per measured read (a fresh one each time, so its page buffer is
empty), the dataset mounted from a local folder (file://) and, unless --backends says
otherwise, from s3rver (s3://). Every measured run starts cold: `cairn free` drops every cached
page of the dataset from the workers and, as root, the kernel's page cache is dropped (so a
file:// source is read from the disk, not from memory).

Measured per backend, --runs times each (median reported):
  load        `cairn load /MOUNT --json` (wall time of the command; its own elapsed_seconds
              and the pages it loaded are recorded)
  cold-seq    one thread reads every file whole, in name order, 1 MiB read() calls
  cold-par8   --readers threads pull files from a shared list and read them the same way
  warm-seq, warm-par8  the same readers right after a load (fresh client; pages come from
              the workers' caches)
Every reader checks each file's size; after each read pass a sample of files is hashed and
compared with the source. A benchmark, not a test: it fails (exit 1) only if something returns
wrong bytes or a command fails.

    /usr/bin/python3 bench/preload_bench.py [--size-mib 1024] [--runs 3] [--backends file,s3]

See docs/benchmarks.md ("Preload benchmark") for a recorded run.
"""
import argparse
import hashlib
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, BENCH_DIR)

from conftest import (S3_BUCKET, S3_KEY, S3_SECRET, S3RVER_JS, Harness, Proc,  # noqa: E402
                      S3Server, free_port, wait_until)
from cluster_util import UFS_BYTES, Cluster, Etcd  # noqa: E402
from readbench import machine, runner  # noqa: E402
from readbench.runner import log  # noqa: E402
from readbench.workloads import drop_caches  # noqa: E402

MIB = 1 << 20
MOUNTS = {"file": "/pre-file", "s3": "/pre-s3"}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=1024, help="dataset size (default 1024)")
    p.add_argument("--file-kib", type=int, default=1024, help="size of each file (default 1024)")
    p.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    p.add_argument("--readers", type=int, default=8, help="threads of the parallel reader")
    p.add_argument("--workers", type=int, default=1, help="cairn worker processes (default 1)")
    p.add_argument("--parallelism", type=int, default=0,
                   help="cairn load --parallelism (default: the command's own default)")
    p.add_argument("--backends", default="file,s3", help="file, s3 or both (default both)")
    p.add_argument("--no-warm", action="store_true", help="skip the reads after a load")
    p.add_argument("--workdir-base", default=tempfile.gettempdir(),
                   help="where the dataset and caches go (a real disk, not tmpfs)")
    p.add_argument("--keep-workdir", action="store_true")
    p.add_argument("--out", help="JSON file (default bench/results/preload-<time>.json)")
    a = p.parse_args(argv)
    a.backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    if not a.backends or any(b not in MOUNTS for b in a.backends):
        p.error("--backends: file, s3 or file,s3")
    if a.size_mib < 1 or a.file_kib < 1 or a.runs < 1 or a.readers < 1 or a.workers < 1:
        p.error("sizes, --runs, --readers and --workers must be >= 1")
    return a


class ReadError(RuntimeError):
    pass


def read_file(path, want_size, buf):
    """Reads `path` whole with 1 MiB read() calls into `buf`; returns the byte count."""
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            n += k
    if n != want_size:
        raise ReadError(f"{path}: read {n} bytes, expected {want_size}")
    return n


def read_pass(root, names, size, readers):
    """Reads every file under `root` with `readers` threads; returns (seconds, bytes)."""
    cursor = iter(range(len(names)))
    lock = threading.Lock()
    errors, totals = [], [0] * readers
    barrier = threading.Barrier(readers + 1)

    def worker(slot):
        buf = bytearray(MIB)
        try:
            barrier.wait()
            while not errors:
                with lock:
                    i = next(cursor, None)
                if i is None:
                    return
                totals[slot] += read_file(os.path.join(root, names[i]), size, buf)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(readers)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return seconds, sum(totals)


class Bench:
    def __init__(self, args, workdir):
        self.a = args
        self.workdir = workdir
        self.src = os.path.join(workdir, "src")
        self.names = [f"f{i:05d}.bin" for i in range(args.size_mib * 1024 // args.file_kib)]
        self.size = args.file_kib * 1024
        self.sha = {}
        self.etcd = self.h = self.cluster = self.s3 = self.s3proc = None
        self.results = {}
        self.commands = {}

    # -- setup ----------------------------------------------------------------------------
    def make_dataset(self):
        os.makedirs(self.src)
        t0 = time.monotonic()
        for name in self.names:
            data = os.urandom(self.size)
            self.sha[name] = hashlib.sha256(data).hexdigest()
            with open(os.path.join(self.src, name), "wb") as f:
                f.write(data)
        os.sync()
        log(f"dataset: {len(self.names)} x {self.size // 1024} KiB in {self.src} "
            f"({time.monotonic() - t0:.1f}s)")

    def start_s3(self):
        port = free_port()
        data = os.path.join(self.workdir, "s3rver")
        os.makedirs(data)
        env = dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider")
        self.s3proc = Proc("s3rver", ["node", S3RVER_JS, "-d", data, "-a", "127.0.0.1", "-p",
                                      port, "-s", "--no-vhost-buckets"], self.workdir, env=env)

        def up():
            if not self.s3proc.alive():
                raise RuntimeError(f"s3rver exited: {self.s3proc.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return True
            except OSError:
                return False
        wait_until(up, 20, "s3rver")
        self.s3 = S3Server(port, self.s3proc)
        self.s3.client.create_bucket(Bucket=S3_BUCKET)
        t0 = time.monotonic()
        n = self.s3.upload_tree(self.src, "preload")
        log(f"uploaded {n} objects to s3rver in {time.monotonic() - t0:.1f}s")

    def start(self):
        # s3:// mounts keep no secrets in etcd: every cairn process reads them from here.
        os.environ["AWS_ACCESS_KEY_ID"] = S3_KEY
        os.environ["AWS_SECRET_ACCESS_KEY"] = S3_SECRET
        self.etcd = Etcd(os.path.join(self.workdir, "etcd"))
        self.etcd.start()
        self.h = Harness(self.a.cairn_bin, os.path.join(self.workdir, "h"))
        cache = f"{int(self.a.size_mib * 1.5 / self.a.workers) + 256}MiB"
        self.cluster = Cluster(self.h, self.etcd, lease_ttl=5, cache_size=cache)
        for i in range(1, self.a.workers + 1):
            self.cluster.start_worker(f"w{i}")
        if "file" in self.a.backends:
            self.cluster.mount_add(MOUNTS["file"], "file://" + self.src)
        if "s3" in self.a.backends:
            self.cluster.mount_add(MOUNTS["s3"], f"s3://{S3_BUCKET}/preload", "--endpoint",
                                   self.s3.endpoint, "--region", "us-east-1")
        self.commands["worker"] = self.cluster.workers["w1"].args
        log(f"etcd {self.etcd.url}; {self.a.workers} worker(s), cache {cache} each")

    def cleanup(self):
        if self.h is not None:
            for e in self.h.cleanup():
                log(f"cleanup: {e}")
        if self.etcd is not None:
            self.etcd.stop()
        if self.s3proc is not None:
            self.s3proc.stop()

    # -- steps ----------------------------------------------------------------------------
    def cold(self):
        """Drops every cached page of the datasets from the workers and the kernel's caches."""
        for m in (MOUNTS[b] for b in self.a.backends):  # Earlier passes left pages too.
            r = self.cluster.cli(["free", m, "--json"], timeout=300)
            if r.returncode != 0:
                raise RuntimeError(f"cairn free {m}: {r.stderr.decode(errors='replace')}")
        if os.geteuid() == 0:
            drop_caches()
        pages = self.cluster.metric_sum("cairn_cache_pages")
        if pages != 0:
            raise RuntimeError(f"{pages:.0f} pages still cached after cairn free")

    def load(self, mount):
        args = ["load", mount, "--json"]
        if self.a.parallelism:
            args += ["--parallelism", str(self.a.parallelism)]
        self.commands["load"] = " ".join([self.a.cairn_bin, *args, "--etcd", self.etcd.url])
        ufs0 = self.cluster.metric_sum(UFS_BYTES)
        t0 = time.perf_counter()
        r = self.cluster.cli(args, timeout=1800)
        seconds = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"cairn load exited {r.returncode}: "
                               f"{r.stderr.decode(errors='replace')[-2000:]}")
        j = json.loads(r.stdout)
        want = len(self.names) * ((self.size + MIB - 1) // MIB)
        if j["pages_loaded"] != want or j["bytes_from_source"] != len(self.names) * self.size:
            raise RuntimeError(f"load was not cold or not complete: {j}")
        ufs = self.cluster.metric_sum(UFS_BYTES) - ufs0
        return {"seconds": seconds, "elapsed_seconds": j["elapsed_seconds"],
                "pages_loaded": j["pages_loaded"], "bytes_from_source": j["bytes_from_source"],
                "worker_ufs_bytes": ufs}

    def read(self, mount, readers):
        """A fresh client reads every file once with `readers` threads; checks a sample."""
        fuse = self.cluster.fuse(name=f"fuse{readers}")
        self.commands["fuse"] = " ".join(fuse.args)
        try:
            root = os.path.join(fuse.mountpoint, mount.lstrip("/"))
            ufs0 = self.cluster.metric_sum(UFS_BYTES)
            seconds, nbytes = read_pass(root, self.names, self.size, readers)
            ufs = self.cluster.metric_sum(UFS_BYTES) - ufs0
            for name in random.Random(len(self.results)).sample(self.names, 4):
                with open(os.path.join(root, name), "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != self.sha[name]:
                        raise ReadError(f"{mount}/{name}: wrong bytes")
        finally:
            fuse.stop()
            self.h.procs.remove(fuse)
        return {"seconds": seconds, "bytes": nbytes, "worker_ufs_bytes": ufs}

    def run_backend(self, backend):
        mount = MOUNTS[backend]
        res = {k: [] for k in ("load", "cold-seq", "cold-par8", "warm-seq", "warm-par8")}
        for run in range(self.a.runs):
            self.cold()
            res["load"].append(self.load(mount))
            if not self.a.no_warm:
                res["warm-seq"].append(self.read(mount, 1))
                res["warm-par8"].append(self.read(mount, self.a.readers))
            self.cold()
            res["cold-seq"].append(self.read(mount, 1))
            self.cold()
            res["cold-par8"].append(self.read(mount, self.a.readers))
            log(f"  {backend} run {run + 1}: " + ", ".join(
                f"{k} {v[-1]['seconds']:.2f}s" for k, v in res.items() if v))
        total = len(self.names) * self.size
        summary = {}
        for k, runs in res.items():
            if not runs:
                continue
            med = statistics.median(r["seconds"] for r in runs)
            summary[k] = {"median_s": med, "MBps": total / med / 1e6,
                          "runs_s": [r["seconds"] for r in runs]}
        load = summary["load"]["median_s"]
        summary["ratios"] = {
            "cold_seq_over_load": summary["cold-seq"]["median_s"] / load,
            "cold_par8_over_load": summary["cold-par8"]["median_s"] / load}
        self.results[backend] = {"raw": res, "summary": summary}


def report(b, args):
    total_mib = len(b.names) * b.size / MIB
    lines = [f"dataset: {len(b.names)} files x {b.size // 1024} KiB = {total_mib:.0f} MiB; "
             f"{args.workers} worker(s); median of {args.runs} runs (seconds, MB/s)"]
    for backend, r in b.results.items():
        s = r["summary"]
        lines.append(f"{backend}:")
        for k in ("load", "cold-seq", "cold-par8", "warm-seq", "warm-par8"):
            if k in s:
                runs = " ".join(f"{x:.2f}" for x in s[k]["runs_s"])
                lines.append(f"  {k:10s} {s[k]['median_s']:7.2f} s  {s[k]['MBps']:7.1f} MB/s"
                             f"   (runs {runs})")
        q = s["ratios"]
        lines.append(f"  cold-seq / load = {q['cold_seq_over_load']:.2f}x, "
                     f"cold-par8 / load = {q['cold_par8_over_load']:.2f}x")
    return lines


def main(argv):
    args = parse_args(argv)
    if os.geteuid() != 0:
        log("not root: the kernel page cache is not dropped between runs (file:// source warm)")
    workdir = runner.make_workdir(args, "cairn-preload-bench-")
    if workdir is None:
        return 2
    b = Bench(args, workdir)

    info = machine.info(workdir, REPO, os.path.abspath(args.cairn_bin))
    log(machine.info_text(info))

    def body():
        b.make_dataset()
        if "s3" in args.backends:
            b.start_s3()
        b.start()
        for backend in args.backends:
            log(f"{backend}:")
            b.run_backend(backend)

    return runner.run("preload", args, workdir, b, body, lambda: report(b, args), info,
                      lambda: b.h.procs if b.h is not None else [], lambda: b.results,
                      extra=lambda: {"commands": b.commands})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
