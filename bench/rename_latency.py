#!/usr/bin/python3
"""What a checkpoint rename costs on a write-back mount: `os.replace(NAME.tmp, NAME)` timed
alone, through `cairn up --write-mode back` over s3rver, for one or more cairn binaries in
alternating rounds (medians and ratios against the first binary, same run).

Two cases, each after a small checkpoint was written to NAME.tmp:
- new:     NAME is a new name in the folder (the absence cache knows it is free);
- replace: NAME is `latest.pt`, already in the lake and not waiting on the worker (the upload
           of the one before has landed: the script waits for it), so the rename must learn
           what the lake holds under it.
Every object is read back from s3rver at the end and compared.

A benchmark, not a test: it fails (exit 1) only if an object reads back wrong or a process
misbehaves. Needs root (FUSE). Run with Debian's interpreter:

    /usr/bin/python3 bench/rename_latency.py [--bin A --bin B] [--renames 20] [--rounds 2]

docs/benchmarks.md ("Renames of pending files: the cost of their condition") has a run.
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, BENCH_DIR)

from conftest import S3_BUCKET, Harness, S3Server, wait_until  # noqa: E402
from write_bench import start_s3rver  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", action="append",
                   help="a cairn binary (repeat; default build/cairn)")
    p.add_argument("--renames", type=int, default=20, help="renames per case and round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", help="write the timings and the summary here (JSON)")
    return p.parse_args(argv)


def save(path, data):
    with open(path, "wb") as f:
        f.write(data)


def lake_holds(s3, key, data):
    """Whether s3rver holds `data` under `key` (a read that races the object's replacement is
    a no, not an error: s3rver may cut it short)."""
    try:
        return s3.object(key) == data
    except Exception:  # noqa: BLE001 - botocore's streaming errors
        return False


def timed_replace(tmp, final):
    start = time.perf_counter()
    os.replace(tmp, final)
    return time.perf_counter() - start


def one_round(harness, s3, binary, tag, renames, work):
    """Renames through a fresh `cairn up` of `binary`; returns {case: [seconds]} and the
    objects the lake must hold."""
    prefix = f"rename-{tag}"
    up = harness.up(f"s3://{S3_BUCKET}/{prefix}", s3=s3, metrics=False,
                    cache_dir=os.path.join(work, f"cache-{tag}"),
                    extra=["--write-mode", "back"], name=f"up-{tag}")
    expected = {}
    times = {"new": [], "replace": []}
    try:
        folder = os.path.join(up.mountpoint, "ckpt")
        os.makedirs(folder, exist_ok=True)
        for i in range(renames):
            data = os.urandom(64 << 10)
            final = os.path.join(folder, f"step-{i}.pt")
            save(final + ".tmp", data)
            times["new"].append(timed_replace(final + ".tmp", final))
            expected[f"{prefix}/ckpt/step-{i}.pt"] = data
        latest = os.path.join(folder, "latest.pt")
        key = f"{prefix}/ckpt/latest.pt"
        data = os.urandom(64 << 10)
        save(latest, data)
        for i in range(renames):
            wait_until(lambda d=data: lake_holds(s3, key, d), 60, "latest.pt to reach the lake")
            data = os.urandom(64 << 10)
            save(latest + ".tmp", data)
            times["replace"].append(timed_replace(latest + ".tmp", latest))
        expected[key] = data
        for k, v in expected.items():
            wait_until(lambda k=k, v=v: lake_holds(s3, k, v), 90, f"{k} to reach the lake")
    finally:
        up.stop()
    return times


def main(argv):
    args = parse_args(argv)
    binaries = args.bin or [os.path.join(REPO, "build", "cairn")]
    for b in binaries:
        if not os.path.exists(b):
            sys.exit(f"{b} missing")
    results = {b: {"new": [], "replace": []} for b in binaries}
    with tempfile.TemporaryDirectory(prefix="cairn-rename-") as work:
        harness = Harness(binaries[0], work)
        s3proc = None
        try:
            s3proc, port = start_s3rver(work)
            s3 = S3Server(port, s3proc)
            for r in range(args.rounds):
                order = binaries if r % 2 == 0 else list(reversed(binaries))
                for b in order:
                    harness.cairn_bin = b
                    tag = f"{binaries.index(b)}-{r}"
                    times = one_round(harness, s3, b, tag, args.renames, work)
                    for case, t in times.items():
                        results[b][case].extend(t)
        finally:
            errors = harness.cleanup()
            if s3proc is not None:
                s3proc.stop()
            if errors:
                print("cleanup:", errors, file=sys.stderr)
    summary = {}
    base = binaries[0]
    print(f"{'binary':50s} {'case':8s} {'median ms':>10s} {'p90 ms':>8s} {'vs first':>9s}")
    for b in binaries:
        for case in ("new", "replace"):
            t = sorted(results[b][case])
            med = statistics.median(t) * 1e3
            p90 = t[min(len(t) - 1, math.ceil(0.9 * len(t)) - 1)] * 1e3
            ratio = med / (statistics.median(results[base][case]) * 1e3)
            summary[f"{b}:{case}"] = {"median_ms": med, "p90_ms": p90, "ratio": ratio}
            print(f"{b:50s} {case:8s} {med:10.2f} {p90:8.2f} {ratio:8.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": platform.node(), "cpus": os.cpu_count(),
                       "renames": args.renames, "rounds": args.rounds,
                       "results": results, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
