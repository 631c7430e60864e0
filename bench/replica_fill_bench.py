#!/usr/bin/python3
"""Cairn replica-fill benchmark: what a replicated mount costs the source.

Three `cairn worker` processes in a private etcd, one `cairn fuse` client, all on this machine.
For R = 1, 2 and 3 (one mount per R, each on its own copy of the dataset; `cairn free` empties
the cache between runs, so every run starts cold) it measures, median of --runs:

  (a) a cold read of the whole dataset through the mount (O_DIRECT 1 MiB reads, --readers
      threads): wall time, bytes read from the source by all workers, pages copied between
      workers (peer fills), and the time until every page is on R workers (fills are background);
  (b) `cairn load` of the dataset on a fresh copy: wall time and source bytes.

Both with peer fills (the default: the other replicas copy each page from the first) and, as
the baseline of the same run, with `cairn worker --no-peer-fill` (every replica reads the source
itself). Source bytes / dataset bytes is the egress factor: 1.0 whatever R with peer fills, R
without. --source-bandwidth caps each worker's source reads (`--ufs-max-bandwidth`), to mimic a
shared cross-region link instead of this machine's local folder. A benchmark, not a test: it
prints the numbers and writes them to a JSON file; it fails (exit 1) only if a read returns
wrong bytes or a process misbehaves.

    /usr/bin/python3 bench/replica_fill_bench.py [--size-mib 256] [--source-bandwidth 100MiB]

See docs/benchmarks.md ("Replica fill benchmark").
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, BENCH_DIR)

from cluster_bench import Bench, machine  # noqa: E402
from conftest import wait_until  # noqa: E402
from cluster_util import PAGES, UFS_BYTES, metrics_of  # noqa: E402
from readbench import runner  # noqa: E402
from readbench.runner import log  # noqa: E402

MIB = 1 << 20
PEER_FILLS = "cairn_worker_peer_fills_total"
PEER_FAILURES = "cairn_worker_peer_fill_failures_total"
REPLICAS = (1, 2, 3)
MODES = ("peer", "source")  # Peer fills on; off (--no-peer-fill), the baseline.


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=256, help="dataset size (default 256)")
    p.add_argument("--source-bandwidth", default="",
                   help="per-worker cap on source reads, e.g. 100MiB (default: none)")
    p.add_argument("--file-mib", type=int, default=16, help="size of each file (default 16)")
    p.add_argument("--readers", type=int, default=4, help="reader threads (default 4)")
    p.add_argument("--runs", type=int, default=3, help="measured runs per R (median)")
    p.add_argument("--worker-timeout", default="2s", help="client --worker-timeout")
    p.add_argument("--workdir-base", default=tempfile.gettempdir())
    p.add_argument("--keep-workdir", action="store_true")
    p.add_argument("--out", help="JSON file (default bench/results/replica-fill-<time>.json)")
    return p.parse_args(argv)


class ReplicaBench(Bench):
    """Bench (cluster_bench.py) with one mount per (R, phase), each over its own source copy."""

    def start(self):
        # No eviction: one R = 3 dataset at a time is one dataset-size per worker.
        self.args.drop_caches = False
        self.start_etcd_and_harness(cache_mib=int(self.args.size_mib * 1.25) + 64)
        for r in REPLICAS:
            self.cluster.mount_add(f"/r{r}", "file://" + self.copy_source(f"src-r{r}"),
                                   "--replicas", str(r))

    def start_workers(self, mode):
        """Three fresh workers (new ids, empty caches); the previous ones stop first."""
        for p in self.cluster.workers.values():
            if p.alive():
                p.stop()
        extra = ["--ufs-max-bandwidth", self.args.source_bandwidth] \
            if self.args.source_bandwidth else []
        if mode == "source":
            extra.append("--no-peer-fill")
        ids = [f"{mode}{i}" for i in (1, 2, 3)]
        for wid in ids:
            self.cluster.start_worker(wid, extra=extra)
        wait_until(lambda: sorted(self.cluster.etcd.worker_ids()) == ids, 10,
                   f"exactly {ids} in etcd", interval=0.05)

    def sums(self):
        """The counters this benchmark reads, summed over the workers."""
        per_worker = [metrics_of(p.metrics_port) for p in self.cluster.workers.values()
                      if p.alive()]
        return {k: sum(m.get(k, 0.0) for m in per_worker)
                for k in (UFS_BYTES, PAGES, PEER_FILLS, PEER_FAILURES)}

    def copy_source(self, name):
        dst = os.path.join(self.workdir, name)
        shutil.copytree(self.src, dst)
        return dst

    def free(self, mount):
        """Drops every cached page of the mount (the next run starts cold)."""
        out = self.cluster.cli(["free", mount], timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"cairn free {mount} exited {out.returncode}: {out.stderr!r}")

    def finish(self, mount, before, took):
        """After a measurement: what the workers did since `before`; then empties the mount."""
        after = self.sums()
        self.free(mount)
        res = {"seconds": took,
               "source_bytes": after[UFS_BYTES] - before[UFS_BYTES],
               "pages_stored": after[PAGES] - before[PAGES],
               "peer_fills": after[PEER_FILLS] - before[PEER_FILLS],
               "peer_fill_failures": after[PEER_FAILURES] - before[PEER_FAILURES]}
        res["egress_factor"] = res["source_bytes"] / self.total_bytes
        return res

    def cold_read(self, r, run):
        self.mount = f"/r{r}"
        before = self.sums()
        fuse = self.fuse(["--no-short-circuit"], f"read-r{r}-{run}")
        took, n = self.read_all(fuse)
        self.check_sample(fuse, run)
        t_read = time.monotonic()
        want = before[PAGES] + r * self.total_pages
        wait_until(lambda: self.sums()[PAGES] >= want, 120, f"{want} pages stored")
        replicated = time.monotonic() - t_read + took
        fuse.stop()
        res = self.finish(self.mount, before, took)
        res.update(MBps=n / took / 1e6, replicated_seconds=replicated)
        log(f"  R={r} cold read: {res['MBps']:6.0f} MB/s ({took:.2f} s; all {r} copies after "
            f"{replicated:.2f} s); source {res['egress_factor']:.2f} x dataset; peer fills "
            f"{res['peer_fills']:.0f} (failed {res['peer_fill_failures']:.0f})")
        return res

    def load(self, r):
        mount = f"/r{r}"
        before = self.sums()
        t0 = time.monotonic()
        out = self.cluster.cli(["load", mount, "--json"], timeout=600)
        took = time.monotonic() - t0
        if out.returncode != 0:
            raise RuntimeError(f"cairn load {mount} exited {out.returncode}: {out.stderr!r}")
        j = json.loads(out.stdout)
        res = self.finish(mount, before, took)
        res.update(MBps=self.total_bytes / took / 1e6,
                   reported_source_bytes=j["bytes_from_source"])
        log(f"  R={r} load: {res['MBps']:6.0f} MB/s of dataset ({took:.2f} s); source "
            f"{res['egress_factor']:.2f} x dataset (load reports {j['bytes_from_source']}); "
            f"{res['pages_stored']:.0f} pages stored; peer fills {res['peer_fills']:.0f}")
        return res

    def path(self, fuse, name):
        return os.path.join(fuse.mountpoint, self.mount.lstrip("/"), name)


def medians(runs):
    """Per key, the median over the runs (every run's dict has the same keys)."""
    return {k: statistics.median(run[k] for run in runs) for k in runs[0]}


def report(results, args):
    cap = f"source capped at {args.source_bandwidth}/s per worker" if args.source_bandwidth \
        else "source uncapped (local folder)"
    lines = [f"replica fill, 3 workers, {args.size_mib} MiB cold, {args.readers} readers, {cap}, "
             f"median of {args.runs}; baseline = --no-peer-fill in the same run:"]
    # For reads, "done" is when every page is on R workers (the fills run in the background).
    for kind, what, done in (("read", "cold read through FUSE", "replicated_seconds"),
                             ("load", "cairn load", "seconds")):
        lines.append(f"  {what} (s: until all R copies are cached):")
        lines.append("    R | peer fill: MB/s      s  source x | no peer fill: MB/s      s  "
                     "source x | peer/no-peer: s  egress")
        for r in REPLICAS:
            a = medians(results["peer"][kind][r])
            b = medians(results["source"][kind][r])
            lines.append(f"    {r} | {a['MBps']:15.0f} {a[done]:6.2f} {a['egress_factor']:9.2f} | "
                         f"{b['MBps']:18.0f} {b[done]:6.2f} {b['egress_factor']:9.2f} | "
                         f"{a[done] / b[done]:15.2f} {a['egress_factor'] / b['egress_factor']:7.2f}")
    return lines


def main(argv):
    args = parse_args(argv)
    workdir = runner.make_workdir(args, "cairn-replica-bench-")
    if workdir is None:
        return 2
    b = ReplicaBench(args, workdir)
    results = {mode: {"read": {r: [] for r in REPLICAS}, "load": {r: [] for r in REPLICAS}}
               for mode in MODES}
    done = []

    def body():
        log(f"workdir {workdir}; dataset {args.size_mib} MiB in {args.file_mib} MiB files")
        b.make_dataset()
        b.start()
        for mode in MODES:
            log(f"{mode} fill" + (" (--no-peer-fill)" if mode == "source" else ""))
            b.start_workers(mode)
            for run in range(args.runs):  # Interleaved: drift hits every R alike.
                for r in REPLICAS:
                    results[mode]["read"][r].append(b.cold_read(r, run))
                for r in REPLICAS:
                    results[mode]["load"][r].append(b.load(r))
        done.append(True)

    return runner.run("replica-fill", args, workdir, b, body,
                      lambda: report(results, args) if done else [], machine(),
                      lambda: b.harness.procs if b.harness else [], lambda: results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
