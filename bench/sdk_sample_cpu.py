#!/usr/bin/python3
"""CPU per sample of the Python SDK's client.read_range against a local readinto, in one
process: what a DataLoader worker spends per resnet50-like sample (issue 11's emulated
accelerators share two cores with the worker, so CPU per sample is what bounds them).

A `cairn up file://FOLDER --listen ...` serves N files of SIZE bytes; the SDK connects to it
(short-circuit reads of the worker's page files), reads every file once (cached), then each
round times N read_range calls and N local open+readinto of the same files, the page cache
dropped before each, and prints wall time and CPU time per sample (the reader's own, and the
worker's from /proc). With --hot the page cache is kept. Needs root (drop_caches) and the
release build's Python module (build/python).

    /usr/bin/python3 bench/sdk_sample_cpu.py [--files 2000] [--size 114660] [--rounds 3] [--hot]

CAIRN_PYTHON_DIR=DIR runs another build's module (a copy of an older build/python) for an A/B.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
# CAIRN_PYTHON_DIR: another build's Python module, for an A/B of two builds.
sys.path.insert(0, os.environ.get("CAIRN_PYTHON_DIR", os.path.join(REPO, "build", "python")))

import cairn  # noqa: E402
from conftest import Harness, free_port  # noqa: E402


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def process_cpu(pid):
    """User + system seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn, worker_pid):
    """(wall, own CPU, worker CPU) seconds of fn()."""
    start, mine, theirs = time.perf_counter(), os.times(), process_cpu(worker_pid)
    fn()
    after = os.times()
    return (time.perf_counter() - start,
            (after.user - mine.user) + (after.system - mine.system),
            process_cpu(worker_pid) - theirs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--size", type=int, default=114660)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hot", action="store_true", help="keep the page cache between rounds")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="cairn-sample-cpu-", dir="/var/tmp") as work:
        src = os.path.join(work, "src")
        os.makedirs(src)
        rnd = random.Random(1)
        names = [f"s{i:05d}.bin" for i in range(args.files)]
        for name in names:
            with open(os.path.join(src, name), "wb") as f:
                f.write(rnd.randbytes(args.size))
        harness = Harness(args.bin, os.path.join(work, "h"))
        port = free_port()
        up = harness.up("file://" + src, cache_size="2GiB",
                        extra=["--listen", f"127.0.0.1:{port}"], name="up")
        try:
            client = cairn.connect(workers=[f"127.0.0.1:{port}"],
                                   mounts={"/": {"uri": "file://" + src}})
            for name in names:  # Into the cache.
                assert len(client.read_range("/" + name, 0, args.size)) == args.size
            buf = bytearray(args.size)

            def sdk():
                for name in names:
                    client.read_range("/" + name, 0, args.size)

            def local():
                for name in names:
                    with open(os.path.join(src, name), "rb", buffering=0) as f:
                        f.readinto(buf)

            results = {"sdk": [], "local": []}
            for _ in range(args.rounds):
                for way, fn in (("sdk", sdk), ("local", local)):
                    if not args.hot:
                        drop_caches()
                    results[way].append(timed(fn, up.pid))
            n = args.files
            print(f"{n} files of {args.size} bytes, {'hot' if args.hot else 'page cache dropped'}, "
                  f"medians of {args.rounds} (us per sample):")
            for way, runs in results.items():
                wall = statistics.median(r[0] for r in runs) / n * 1e6
                own = statistics.median(r[1] for r in runs) / n * 1e6
                worker = statistics.median(r[2] for r in runs) / n * 1e6
                print(f"  {way:6s} wall {wall:6.0f}  reader CPU {own:6.0f}  worker CPU {worker:6.0f}")
        finally:
            up.stop()


if __name__ == "__main__":
    main()
