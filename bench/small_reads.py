#!/usr/bin/python3
"""Small files read whole, one at a time, by a fresh process: the cost per file of the Python
SDK (`client.open(..., buffering=0).readinto`), of the same files through the `cairn up` FUSE
mount, and of the local folder they come from (what a new DataLoader worker does per sample).

A `cairn up file://FOLDER --listen ...` serves N files of SIZE bytes; they are read once through
the mount (cached), then each way is timed in a new process, once with the page cache dropped
and once with it kept. Needs root (FUSE, drop_caches) and the release build's Python module
(build/python).

    /usr/bin/python3 bench/small_reads.py [--files 1500] [--size 114660] [--bin build/cairn]

docs/benchmarks.md ("Small files read whole by the SDK") has a recorded run.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import Harness, free_port  # noqa: E402

READER = r'''
import sys, time
mode, where, count, size, port, pypath = sys.argv[1:7]
count, size = int(count), int(size)
sys.path.insert(0, pypath)
view = memoryview(bytearray(size))
if mode == "sdk":
    import cairn
    client = cairn.connect(workers=["127.0.0.1:" + port], mounts={"/": {"uri": "file://" + where}})
    opener, root = (lambda p: client.open(p, "rb", buffering=0)), ""
else:
    opener, root = (lambda p: open(p, "rb", buffering=0)), where
times = []
for i in range(count):
    start = time.perf_counter()
    with opener(root + f"/s{i:05d}.bin") as f:
        n = 0
        while n < size:
            got = f.readinto(view[n:])
            if not got:
                break
            n += got
    if n != size:
        sys.exit(f"{mode}: file {i} read {n} bytes")
    times.append(time.perf_counter() - start)
times.sort()
print(f"{times[len(times) // 2] * 1e3:.3f} {times[int(len(times) * 0.9)] * 1e3:.3f}")
'''


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--files", type=int, default=1500)
    p.add_argument("--size", type=int, default=114660, help="bytes per file (resnet50's sample)")
    args = p.parse_args(argv)
    pypath = os.path.join(os.path.dirname(os.path.abspath(args.bin)), "python")
    with tempfile.TemporaryDirectory(prefix="cairn-small-", dir="/var/tmp") as work:
        src = os.path.join(work, "src")
        os.makedirs(src)
        for i in range(args.files):
            with open(os.path.join(src, f"s{i:05d}.bin"), "wb") as f:
                f.write(os.urandom(args.size))
        harness = Harness(args.bin, work)
        port = free_port()
        up = harness.up(f"file://{src}", metrics=False, cache_size="2GiB",
                        extra=["--listen", f"127.0.0.1:{port}"], name="up-small")
        try:
            for i in range(args.files):  # Into the cache.
                with open(os.path.join(up.mountpoint, f"s{i:05d}.bin"), "rb") as f:
                    f.read()
            time.sleep(5)  # The worker stores fetched pages after replying.
            print(f"{args.files} files of {args.size} bytes, ms per file (median, p90):")
            for state in ("page cache dropped", "page cache kept"):
                for mode, where in (("local", src), ("fuse", up.mountpoint), ("sdk", src)):
                    if state == "page cache dropped":
                        drop_caches()
                    out = subprocess.run(
                        ["/usr/bin/python3", "-c", READER, mode, where, str(args.files),
                         str(args.size), str(port), pypath],
                        check=True, capture_output=True, text=True).stdout.split()
                    print(f"  {state:<19} {mode:<6} {out[0]:>7} {out[1]:>7}", flush=True)
        finally:
            harness.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
