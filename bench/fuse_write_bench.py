#!/usr/bin/python3
"""Checkpoint writes through the FUSE mount: a file written with 1 MiB write(2)s to a `cairn up
--write-mode through` mount, timed from open to close (close returns once the file is in the
source), against the same bytes written to a local file and fsync'd, in one run, medians and
ratios. Sources: a local folder (file://, on the same disk: the cost of FUSE + the worker +
the commit) and s3rver (the cost of getting it into an object store while writing, against
"write locally, then upload with boto3").

A benchmark, not a test: it fails (exit 1) only if a file reads back wrong or a process
misbehaves. Needs root (FUSE) and the release build. Run with Debian's interpreter:

    /usr/bin/python3 bench/fuse_write_bench.py [--size-mib 1024] [--runs 3] [--out FILE.json]

docs/benchmarks.md ("Checkpoint writes through the mount") has a recorded run.
"""
import argparse
import hashlib
import json
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

from conftest import S3_BUCKET, Harness, S3Server  # noqa: E402
from write_bench import start_s3rver  # noqa: E402

CHUNK = 1 << 20


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", help="write all runs and the summary here (JSON)")
    return p.parse_args(argv)


def write_file(path, data, fsync):
    """Writes `data` with 1 MiB writes; returns seconds from open to close."""
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        for i in range(0, len(data), CHUNK):
            os.write(fd, view[i:i + CHUNK])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def wait_in_lake(s3, key):
    """Returns once a HEAD of `key` answers (404 until the upload completes)."""
    while True:
        try:
            s3.client.head_object(Bucket=S3_BUCKET, Key=key)
            return
        except Exception:  # noqa: BLE001
            time.sleep(0.01)


def lake_digest(s3, key, want):
    """The SHA-256 of `key` in s3rver once it holds all of it: s3rver writes an object's
    file in place, and a GET racing that write (even after a HEAD answered) reads part of it.
    A wrong object stays wrong: the last answer after 10 s is returned."""
    deadline = time.monotonic() + 10
    while True:
        got = hashlib.sha256(s3.client.get_object(Bucket=S3_BUCKET,
                                                  Key=key)["Body"].read()).hexdigest()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def main(argv):
    args = parse_args(argv)
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} missing: build it (scripts/build.sh release)")
    data = os.urandom(args.size_mib * CHUNK)
    want = hashlib.sha256(data).hexdigest()
    runs = []
    with tempfile.TemporaryDirectory(prefix="cairn-fuse-write-bench-", dir="/var/tmp") as work:
        harness = Harness(args.bin, work)
        s3proc = None
        try:
            src = os.path.join(work, "src")
            os.makedirs(src)
            local = harness.up("file://" + src, cache_dir=os.path.join(work, "cache-local"),
                               metrics=False, extra=["--write-mode", "through"], name="up-file")
            s3proc, port = start_s3rver(work)
            s3 = S3Server(port, s3proc)
            remote = harness.up(f"s3://{S3_BUCKET}/fuse-bench", s3=s3, metrics=False,
                                cache_dir=os.path.join(work, "cache-s3"),
                                extra=["--write-mode", "through"], name="up-s3")
            back = harness.up(f"s3://{S3_BUCKET}/fuse-bench-back", s3=s3, metrics=False,
                              cache_dir=os.path.join(work, "cache-back"),
                              extra=["--write-mode", "back"], name="up-back")
            for run in range(args.runs):
                name = f"ckpt-{run}.bin"
                t = write_file(os.path.join(work, name), data, fsync=True)
                runs.append({"mode": "local+fsync", "s": t})
                t = write_file(os.path.join(local.mountpoint, name), data, fsync=False)
                assert digest(os.path.join(src, name)) == want, "file:// source differs"
                runs.append({"mode": "mount file://", "s": t})
                t = write_file(os.path.join(remote.mountpoint, name), data, fsync=False)
                runs.append({"mode": "mount s3rver", "s": t})
                # Write-back: close returns once the file is journaled on the worker's disk;
                # "in the lake" adds the wait until the object is there.
                start = time.perf_counter()
                t = write_file(os.path.join(back.mountpoint, name), data, fsync=False)
                runs.append({"mode": "mount s3rver back", "s": t})
                wait_in_lake(s3, f"fuse-bench-back/{name}")
                runs.append({"mode": "back: in the lake", "s": time.perf_counter() - start})
                assert lake_digest(s3, f"fuse-bench-back/{name}", want) == want, \
                    "write-back object differs"
                # The checkpoint libraries' idiom: a temporary name, then rename(2) onto the
                # final one. The rename moves the pending upload (it does not wait for it).
                final = f"renamed-{run}.bin"
                start = time.perf_counter()
                write_file(os.path.join(back.mountpoint, final + ".tmp"), data, fsync=False)
                os.replace(os.path.join(back.mountpoint, final + ".tmp"),
                           os.path.join(back.mountpoint, final))
                runs.append({"mode": "back: tmp + rename", "s": time.perf_counter() - start})
                wait_in_lake(s3, f"fuse-bench-back/{final}")
                runs.append({"mode": "back: renamed in lake", "s": time.perf_counter() - start})
                assert lake_digest(s3, f"fuse-bench-back/{final}", want) == want, \
                    "renamed object differs"
                assert digest(os.path.join(back.mountpoint, final)) == want, "mount differs"
                start = time.perf_counter()
                write_file(os.path.join(work, "up-" + name), data, fsync=False)
                s3.client.upload_file(os.path.join(work, "up-" + name), S3_BUCKET,
                                      f"boto/{name}")
                runs.append({"mode": "local+boto3 upload", "s": time.perf_counter() - start})
                assert lake_digest(s3, f"fuse-bench/{name}", want) == want, \
                    "s3rver object differs"
                for f in (name, "up-" + name):
                    os.unlink(os.path.join(work, f))
        finally:
            errors = harness.cleanup()
            if s3proc is not None:
                s3proc.stop()
            if errors:
                print("cleanup:", errors, file=sys.stderr)
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, Linux {platform.release()}"
    print(f"machine: {machine}")
    print(f"{args.size_mib} MiB written with 1 MiB write(2)s, open to close (durable), "
          f"medians of {args.runs} runs")
    summary = {}
    for mode in ("local+fsync", "mount file://", "mount s3rver", "mount s3rver back",
                 "back: in the lake", "back: tmp + rename", "back: renamed in lake",
                 "local+boto3 upload"):
        s = statistics.median(r["s"] for r in runs if r["mode"] == mode)
        summary[mode] = s
        print(f"{mode:<20} {s:7.2f} s {args.size_mib * 1.048576 / s:7.0f} MB/s")
    print(f"mount file:// / local+fsync: {summary['mount file://'] / summary['local+fsync']:.2f}x "
          f"the time; mount s3rver / local+boto3 upload: "
          f"{summary['mount s3rver'] / summary['local+boto3 upload']:.2f}x; write-back close / "
          f"local+fsync: {summary['mount s3rver back'] / summary['local+fsync']:.2f}x; "
          f"tmp + rename / local+fsync: "
          f"{summary['back: tmp + rename'] / summary['local+fsync']:.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": machine, "args": vars(args), "runs": runs,
                       "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
