#!/usr/bin/python3
"""Hot reads (the kernel page cache kept) of one large file, from the local folder and through a
`cairn up` FUSE mount of that folder, and the size of the page-cache folios each file is cached
in, which is what separates them on kernels whose local file systems use large folios.

A file of SIZE MiB is written to a folder, `cairn up file://FOLDER` mounts it and it is read
through the mount until every page is cached. Then:

  hot MB/s      each file read whole with 1 MiB and 128 KiB read(2)s, RUNS times each way
                (medians), after both were read once (no disk reads, no FUSE READs: the mount
                keeps the kernel's page cache across opens);
  folio orders  the page cache dropped, the file read once, and the page cache insertions it
                made counted by folio order (the `filemap:mm_filemap_add_to_page_cache`
                tracepoint, through `perf record`): order 0 is a 4 KiB page, order 9 is 2 MiB.

Needs root (FUSE, drop_caches, perf) and the release build:

    /usr/bin/python3 bench/hot_read_folios.py [--size-mib 256] [--runs 5] [--bin build/cairn]

docs/benchmarks.md ("Hot reads and the kernel's folio sizes") has a recorded run.
"""
import argparse
import collections
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import Harness  # noqa: E402

MiB = 1 << 20


def read_whole(path, block):
    """Reads `path` whole with `block`-byte reads; returns MB/s."""
    buf = bytearray(block)
    done = 0
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            done += n
    return done / (time.perf_counter() - start) / 1e6


def drop_caches():
    subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)


def folio_orders(path, work):
    """Page cache insertions by folio order while `path` is read once from a dropped cache."""
    out = os.path.join(work, "folios.data")
    drop_caches()
    rec = subprocess.Popen(["perf", "record", "-q", "-e", "filemap:mm_filemap_add_to_page_cache",
                            "-a", "-o", out, "--", "sleep", "3"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    read_whole(path, MiB)
    if rec.wait() != 0:
        sys.exit("perf record failed (root and the filemap tracepoints are needed)")
    script = subprocess.run(["perf", "script", "-i", out], capture_output=True, text=True,
                            check=True).stdout
    counts = collections.Counter(int(o) for o in re.findall(r"order=(\d+)", script))
    return dict(sorted(counts.items()))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=256)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} missing: build it (scripts/build.sh release)")
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="cairn-hot-", dir="/var/tmp") as work:
        src = os.path.join(work, "src")
        os.makedirs(src)
        local = os.path.join(src, "big.bin")
        with open(local, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(MiB))
        harness = Harness(args.bin, work)
        try:
            up = harness.up("file://" + src, cache_dir=os.path.join(work, "cache"),
                            cache_size=f"{2 * args.size_mib}MiB", metrics=False)
            mounted = os.path.join(up.mountpoint, "big.bin")
            for path in (mounted, mounted, local):
                read_whole(path, MiB)
            for block in (MiB, 128 << 10):
                loc = statistics.median(read_whole(local, block) for _ in range(args.runs))
                fuse = statistics.median(read_whole(mounted, block) for _ in range(args.runs))
                print(f"hot, {block >> 10} KiB reads: local {loc:,.0f} MB/s, cairn {fuse:,.0f} "
                      f"MB/s, cairn / local {fuse / loc:.2f}")
            for name, path in (("local", local), ("cairn", mounted)):
                print(f"folio orders of a read from a dropped cache, {name}: "
                      f"{folio_orders(path, work)}")
        finally:
            errors = harness.cleanup()
            if errors:
                print("\n".join(errors), file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
