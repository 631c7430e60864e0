#!/usr/bin/python3
"""What asking the workers for metadata costs (`--metadata-via-workers`, protocol v4 StatPath /
ListDir) against a client that lists the source itself, on this machine.

One `cairn worker` (plaintext, 127.0.0.1) serves a folder holding a directory of --files small
files and one of a single file. Each measured operation is one `cairn` process, exactly as a user
runs it: `cairn ls` of the big directory (--files names, in pages of 1,000), `cairn ls` of the
one-file directory (what a process start and one round trip cost) and `cairn stat` of one file,
each with the source (`--mount ... --worker ...`: the client lists the folder itself) and with
`--metadata-via-workers` (the worker lists it and sends the names). Modes alternate; medians of
--runs. Every listing is checked to hold exactly the expected names.

A benchmark, not a test: it fails (exit 1) only if an answer is wrong or a process misbehaves.
Run with Debian's interpreter:

    /usr/bin/python3 bench/metadata_bench.py [--files 20000] [--runs 7] [--out FILE.json]

docs/benchmarks.md ("Metadata through the workers") has a recorded run.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import Harness  # noqa: E402

MOUNT = "/bench"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--files", type=int, default=20000)
    p.add_argument("--runs", type=int, default=7, help="measured runs per mode (median)")
    p.add_argument("--out", default=None, help="JSON file for every raw value")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cairn-metadata-bench-") as workdir:
        src = os.path.join(workdir, "src")
        big = os.path.join(src, "big")
        os.makedirs(big)
        os.makedirs(os.path.join(src, "one"))
        names = [f"sample-{i:06d}.bin" for i in range(args.files)]
        for n in names:
            with open(os.path.join(big, n), "wb") as f:
                f.write(b"x")
        with open(os.path.join(src, "one", "only.bin"), "wb") as f:
            f.write(b"y" * 100)
        h = Harness(os.path.abspath(args.cairn_bin), os.path.join(workdir, "h"))
        try:
            mount = f"{MOUNT}=file://{src}"
            w = h.worker([mount], os.path.join(workdir, "cache"), name="worker")
            base = ["--mount", mount, "--worker", f"127.0.0.1:{w.listen_port}"]
            modes = {"source": base, "workers": [*base, "--metadata-via-workers"]}
            ops = {
                "ls_big": (["ls", f"{MOUNT}/big"], sorted(names)),
                "ls_one": (["ls", f"{MOUNT}/one"], ["only.bin"]),
                "stat": (["stat", f"{MOUNT}/one/only.bin"], None),
            }
            times = {op: {m: [] for m in modes} for op in ops}
            for run in range(args.runs + 1):  # The first round warms caches and is dropped.
                for op, (cmd, want) in ops.items():
                    for mode, flags in modes.items():
                        start = time.perf_counter()
                        r = h.run([*cmd, *flags], timeout=120)
                        elapsed = time.perf_counter() - start
                        if r.returncode != 0:
                            raise RuntimeError(f"{cmd} ({mode}): {r.stderr.decode()}")
                        if want is not None and r.stdout.decode().split() != want:
                            raise RuntimeError(f"{cmd} ({mode}) listed the wrong names")
                        if want is None and b"100" not in r.stdout:
                            raise RuntimeError(f"{cmd} ({mode}): {r.stdout.decode()}")
                        if run > 0:
                            times[op][mode].append(elapsed)
        finally:
            errors = h.cleanup()
            if errors:
                raise RuntimeError(f"cleanup: {errors}")

    print(f"files in the big directory: {args.files}, runs: {args.runs}, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'median ms':<12} {'source':>10} {'workers':>10} {'workers/source':>15}")
    for op in ops:
        s = statistics.median(times[op]["source"]) * 1000
        v = statistics.median(times[op]["workers"]) * 1000
        print(f"{op:<12} {s:>10.1f} {v:>10.1f} {v / s:>14.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"files": args.files, "runs": args.runs, "seconds": times}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
