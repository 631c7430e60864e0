#!/usr/bin/python3
"""What a new file costs through a Cairn mount over s3rver: many small files written one after
another into one new folder (open(O_CREAT|O_TRUNC), write, close), as a sharded checkpoint or a
preprocessing job writes them, with the time of each step. A/B between cairn binaries: for each
round and each binary (alternating, so that machine drift hits both alike) a fresh s3rver and a
fresh `cairn up --write-mode MODE`. Needs root (FUSE).

    /usr/bin/python3 bench/create_cost.py --bin OLD --bin NEW [--mode back|through]
                                          [--files 100] [--size 1024] [--rounds 2]

Per file: "open" is the kernel's lookup of the new name plus the create (the worker's open),
"close" the commit (write-through: the object is in the lake) or the journaled close
(write-back). docs/benchmarks.md ("Fewer lake requests per new file") has a recorded run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(BENCH_DIR), "tests"))
sys.path.insert(0, BENCH_DIR)

from conftest import S3_BUCKET, Harness, S3Server  # noqa: E402
from write_bench import start_s3rver  # noqa: E402


def one_run(binary, mode, files, size, work):
    """Seconds per step for each file, through a fresh s3rver and `cairn up`."""
    data = os.urandom(size)
    os.makedirs(work)
    harness = Harness(binary, work)
    s3proc, port = start_s3rver(work)
    try:
        up = harness.up(f"s3://{S3_BUCKET}/bench", s3=S3Server(port, s3proc), metrics=False,
                        extra=["--write-mode", mode], name="up")
        folder = os.path.join(up.mountpoint, "out")
        os.makedirs(folder)
        steps = {"open": [], "write": [], "close": []}
        start = time.perf_counter()
        for i in range(files):
            t0 = time.perf_counter()
            fd = os.open(os.path.join(folder, f"part-{i:05d}"),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            t1 = time.perf_counter()
            os.write(fd, data)
            t2 = time.perf_counter()
            os.close(fd)
            t3 = time.perf_counter()
            steps["open"].append(t1 - t0)
            steps["write"].append(t2 - t1)
            steps["close"].append(t3 - t2)
        total = time.perf_counter() - start
    finally:
        harness.cleanup()
        s3proc.kill9()
    return total, steps


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", action="append", required=True, help="a cairn binary (repeat)")
    p.add_argument("--mode", choices=("back", "through"), default="back")
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--size", type=int, default=1024, help="bytes per file")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cairn-create-", dir="/var/tmp") as work:
        for rnd in range(args.rounds):
            for i, binary in enumerate(args.bin):
                total, steps = one_run(binary, args.mode, args.files, args.size,
                                       os.path.join(work, f"r{rnd}-{i}"))
                medians = " ".join(f"{k} {1000 * statistics.median(v):.2f}"
                                   for k, v in steps.items())
                print(f"round {rnd} {binary} ({args.mode}): {1000 * total / args.files:.2f} ms "
                      f"per file; medians (ms): {medians}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
