#!/usr/bin/python3
"""Checkpoint writes: a file written through a WriteSession (parts uploaded while it is being
written) against a local file uploaded after close, and against the local file alone, on s3rver,
in one run (build/bench/write_bench does the measuring; this script starts s3rver, runs it with
writes as fast as possible and paced to --pace-mbps, and reports medians and ratios).

What matters for a training job is the time from its first write to "the checkpoint is in the
lake" (the GPUs wait for torch.save, and a job that must not lose the checkpoint waits for the
upload too): `total` = write time + close-to-durable time. `commit` is close-to-durable alone.

A benchmark, not a test: it fails (exit 1) only if an object reads back wrong or a process
misbehaves. Run with Debian's interpreter:

    /usr/bin/python3 bench/write_bench.py [--size-mib 512] [--runs 3] [--pace-mbps 200]
        [--out FILE.json]

docs/benchmarks.md ("Checkpoint writes") has a recorded run.
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import (S3_BUCKET, S3_KEY, S3_SECRET, S3RVER_JS, START_TIMEOUT,  # noqa: E402
                      Proc, free_port, wait_until)

MODES = ("session", "upload", "local")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(REPO, "build", "bench", "write_bench"))
    p.add_argument("--size-mib", type=int, default=512)
    p.add_argument("--part-mib", type=int, default=8)
    p.add_argument("--in-flight", type=int, default=4)
    p.add_argument("--runs", type=int, default=3, help="runs per mode and pace (median)")
    p.add_argument("--pace-mbps", type=float, default=200,
                   help="the paced writer's rate (a serialising torch.save), MB/s")
    p.add_argument("--out", help="write all runs and the summary here (JSON)")
    return p.parse_args(argv)


def start_s3rver(workdir):
    data = os.path.join(workdir, "s3rver-data")
    os.makedirs(data)
    port = free_port()
    env = dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider")
    proc = Proc("s3rver", ["node", str(S3RVER_JS), "-d", data, "-a", "127.0.0.1", "-p", port,
                           "-s", "--no-vhost-buckets"], workdir, env=env)

    def ready():
        if not proc.alive():
            raise RuntimeError(f"s3rver exited: {proc.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return True
        except OSError:
            return False
    wait_until(ready, START_TIMEOUT, "s3rver")
    subprocess.run(["curl", "-sf", "-X", "PUT", f"http://127.0.0.1:{port}/{S3_BUCKET}"],
                   check=True)
    return proc, port


def run_bench(args, port, spool, pace):
    cmd = [args.bin, "--uri", f"s3://{S3_BUCKET}/write-bench",
           "--endpoint", f"http://127.0.0.1:{port}", "--access-key", S3_KEY,
           "--secret-key", S3_SECRET, "--spool-dir", spool, "--size-mib", str(args.size_mib),
           "--part-mib", str(args.part_mib), "--in-flight", str(args.in_flight),
           "--write-mbps", str(pace), "--runs", str(args.runs)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"write_bench failed ({out.returncode}): {out.stderr}")
    return [dict(json.loads(line), pace_mbps=pace) for line in out.stdout.splitlines() if line]


def median(runs, pace, mode, metric):
    return statistics.median(r[metric] for r in runs if r["pace_mbps"] == pace and r["mode"] == mode)


def main(argv):
    args = parse_args(argv)
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} missing: build it (scripts/build.sh release)")
    with tempfile.TemporaryDirectory(prefix="cairn-write-bench-") as workdir:
        spool = os.path.join(workdir, "spool")
        os.makedirs(spool)
        proc, port = start_s3rver(workdir)
        try:
            runs = []
            for pace in (0, args.pace_mbps):
                runs += run_bench(args, port, spool, pace)
        finally:
            proc.stop()
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, Linux {platform.release()}"
    print(f"machine: {machine}")
    print(f"object {args.size_mib} MiB, parts {args.part_mib} MiB, {args.in_flight} in flight, "
          f"s3rver on 127.0.0.1, medians of {args.runs} runs")
    summary = []
    for pace in (0, args.pace_mbps):
        label = "as fast as possible" if pace == 0 else f"paced to {pace:g} MB/s"
        print(f"\nwriter {label}:")
        print(f"{'mode':<8} {'write s':>8} {'commit s':>9} {'total s':>8} {'MB/s':>7}")
        for mode in MODES:
            row = {m: median(runs, pace, mode, m) for m in ("write_s", "commit_s", "total_s")}
            row["mbps"] = args.size_mib * 1.048576 / row["total_s"]
            summary.append(dict(row, pace_mbps=pace, mode=mode))
            print(f"{mode:<8} {row['write_s']:8.2f} {row['commit_s']:9.2f} "
                  f"{row['total_s']:8.2f} {row['mbps']:7.0f}")
        s = {r["mode"]: r for r in summary if r["pace_mbps"] == pace}
        print(f"session total / upload-after-close total: "
              f"{s['session']['total_s'] / s['upload']['total_s']:.2f}x the time; "
              f"close-to-durable: {s['session']['commit_s']:.2f} s vs "
              f"{s['upload']['commit_s']:.2f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": machine, "args": vars(args), "runs": runs,
                       "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
