#!/usr/bin/env python3
"""Same-run A/B of two `cairn` binaries on warm reads, with local disk measured in between.

    sudo /usr/bin/python3 bench/warm_ab.py --a OLD/cairn --b build/cairn [--runs 2] [--epochs 5]

Per binary and run: `cairn up file://SRC MNT` over 4 x 256 MiB and 400 x 1 MiB files, one read of
everything to fill the cache, then `--epochs` warm epochs: page cache dropped, then (1) the four
large files read one after another by one reader with 1 MiB read()s, (2) the small files by 8
threads. The binaries alternate (A B A B ...) and local disk (the same files read from SRC after
the same drop) is measured once per round, so every ratio compares numbers from the same minutes
of a noisy machine. Prints MB/s medians, ratios, and the daemon's CPU ms per MB. Needs root (it
writes /proc/sys/vm/drop_caches) and fusermount3.
"""

import argparse
import concurrent.futures
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

MiB = 1 << 20


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_file(path, bufsize=MiB):
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bufsize)
            if not b:
                return n
            n += len(b)


def timed(fn):
    t0 = time.monotonic()
    n = fn()
    return n / (time.monotonic() - t0) / 1e6  # MB/s


def large_epoch(root, large):
    return timed(lambda: sum(read_file(os.path.join(root, n)) for n in large))


def small_epoch(root, small, threads=8):
    def run():
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            return sum(pool.map(lambda n: read_file(os.path.join(root, n)), small))
    return timed(run)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_source(src, large_n, large_mib, small_n):
    os.makedirs(src, exist_ok=True)
    large = [f"large-{i}.bin" for i in range(large_n)]
    small = [f"small/s{i:04d}.bin" for i in range(small_n)]
    os.makedirs(os.path.join(src, "small"), exist_ok=True)
    for name, size in [(n, large_mib * MiB) for n in large] + [(n, MiB) for n in small]:
        path = os.path.join(src, name)
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as f:
                f.write(os.urandom(size))
    return large, small


class Mount:
    def __init__(self, binary, src, work):
        self.mnt = os.path.join(work, "mnt")
        cache = os.path.join(work, "cache")
        subprocess.run(["fusermount3", "-u", "-q", self.mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(self.mnt, exist_ok=True)
        self.log = open(os.path.join(work, "cairn.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "up", "file://" + src, self.mnt, "--cache-dir", cache, "--cache-size",
             "4GiB"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.mnt, "small")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"cairn up did not come up: see {self.log.name}")
            time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, help="baseline cairn binary")
    p.add_argument("--b", required=True, help="candidate cairn binary")
    p.add_argument("--runs", type=int, default=2, help="rounds of A, B, local")
    p.add_argument("--epochs", type=int, default=5, help="warm epochs per binary and round")
    p.add_argument("--large-files", type=int, default=4)
    p.add_argument("--large-mib", type=int, default=256)
    p.add_argument("--small-files", type=int, default=400)
    p.add_argument("--workdir", default="/tmp/cairn-warm-ab")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("warm_ab.py: needs root (it drops the page cache)")
    src = os.path.join(args.workdir, "src")
    large, small = make_source(src, args.large_files, args.large_mib, args.small_files)
    total_large = args.large_files * args.large_mib * MiB
    total_small = args.small_files * MiB
    results = {k: {"large": [], "small": [], "cpu_large": [], "cpu_small": []}
               for k in ("A", "B", "local")}
    for run in range(args.runs):
        for label, binary in (("A", args.a), ("B", args.b)):
            m = Mount(os.path.abspath(binary), src, os.path.join(args.workdir, label))
            try:
                read_file(os.path.join(m.mnt, large[0]))  # Fill the cache.
                for n in large[1:] + small:
                    read_file(os.path.join(m.mnt, n))
                for _ in range(args.epochs):
                    drop_caches()
                    c0 = cpu_seconds(m.proc.pid)
                    results[label]["large"].append(large_epoch(m.mnt, large))
                    c1 = cpu_seconds(m.proc.pid)
                    drop_caches()
                    results[label]["small"].append(small_epoch(m.mnt, small))
                    c2 = cpu_seconds(m.proc.pid)
                    results[label]["cpu_large"].append((c1 - c0) * 1e3 / (total_large / 1e6))
                    results[label]["cpu_small"].append((c2 - c1) * 1e3 / (total_small / 1e6))
            finally:
                m.stop()
            print(f"run {run + 1} {label}: large {results[label]['large'][-args.epochs:]}",
                  flush=True)
        for _ in range(args.epochs):
            drop_caches()
            results["local"]["large"].append(large_epoch(src, large))
            drop_caches()
            results["local"]["small"].append(small_epoch(src, small))
    med = {k: {w: statistics.median(v) for w, v in r.items() if v} for k, r in results.items()}
    print(f"\nwarm reads, medians of {args.runs} x {args.epochs} epochs (MB/s; CPU: cairn ms/MB)")
    print(f"{'workload':34} {'A':>8} {'B':>8} {'local':>8} {'B/A':>6} {'A/local':>8} "
          f"{'B/local':>8}")
    for w, title in (("large", f"{args.large_mib} MiB x{args.large_files}, 1 reader"),
                     ("small", f"1 MiB x{args.small_files}, 8 readers")):
        a, b, loc = med["A"][w], med["B"][w], med["local"][w]
        print(f"{title:34} {a:8.0f} {b:8.0f} {loc:8.0f} {b / a:6.2f} {a / loc:8.2f} "
              f"{b / loc:8.2f}")
    for w in ("cpu_large", "cpu_small"):
        a, b = med["A"][w], med["B"][w]
        print(f"{'daemon CPU ' + w[4:]:34} {a:8.2f} {b:8.2f} {'':>8} {b / a:6.2f}")
    print("\nall epochs:")
    for k, r in results.items():
        for w, v in r.items():
            if v:
                print(f"  {k:5} {w:9} " + " ".join(f"{x:.0f}" if x > 20 else f"{x:.2f}" for x in v))


if __name__ == "__main__":
    main()
