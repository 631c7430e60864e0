#!/usr/bin/python3
"""Write-back close, A/B between cairn binaries: where a 1 GiB write through a `cairn up
--write-mode back` mount spends its time, against the local disk.

For each round and each binary (alternating, so that machine drift hits both alike): a fresh
`cairn up` over a folder source with an empty cache, the page cache dropped, then one file
written with 1 MiB write(2)s and closed; the time of the writes and of the close (which
returns once the spool is fdatasync'd and journaled) is printed, with the local disk's
write + fsync + close in the same state. Needs root (FUSE, drop_caches).

    /usr/bin/python3 bench/write_back_close_ab.py --bin OLD --bin NEW [--rounds 3] [--size-mib 1024]

docs/benchmarks.md ("Write-back writes pipelined and written behind") has a recorded run.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(BENCH_DIR), "tests"))

from conftest import Harness  # noqa: E402

CHUNK = 1 << 20


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def write(path, data, fsync):
    """Seconds spent in the writes and in fsync + close."""
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(data)
    for i in range(0, len(data), CHUNK):
        os.write(fd, view[i:i + CHUNK])
    written = time.perf_counter()
    if fsync:
        os.fsync(fd)
    os.close(fd)
    return written - start, time.perf_counter() - written


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", action="append", required=True, help="a cairn binary (repeat)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size-mib", type=int, default=1024)
    args = p.parse_args(argv)
    data = os.urandom(args.size_mib * CHUNK)
    results = {b: [] for b in args.bin}
    local = []
    with tempfile.TemporaryDirectory(prefix="cairn-wb-ab-", dir="/var/tmp") as work:
        for rnd in range(args.rounds):
            for i, binary in enumerate(args.bin):
                # A harness (its mount points) per binary and round: the last one's folders stay.
                hwork = os.path.join(work, f"h-{rnd}-{i}")
                os.makedirs(hwork)
                harness = Harness(binary, hwork)
                src = os.path.join(work, f"src-{rnd}-{i}")
                os.makedirs(src)
                up = harness.up(f"file://{src}", metrics=False,
                                cache_dir=os.path.join(work, f"cache-{rnd}-{i}"),
                                cache_size=f"{2 * args.size_mib + 1024}MiB",
                                extra=["--write-mode", "back"], name=f"up-{rnd}-{i}")
                try:
                    drop_caches()
                    w, c = write(os.path.join(up.mountpoint, "f.bin"), data, fsync=False)
                    results[binary].append((w, c))
                    print(f"round {rnd} {binary}: writes {w:.3f} s, close {c:.3f} s, "
                          f"total {w + c:.3f} s", flush=True)
                finally:
                    harness.cleanup()
                subprocess.run(["rm", "-rf", src, os.path.join(work, f"cache-{rnd}-{i}")])
                drop_caches()
                w, c = write(os.path.join(work, "local.bin"), data, fsync=True)
                os.unlink(os.path.join(work, "local.bin"))
                local.append((w, c))
                print(f"round {rnd} local+fsync: writes {w:.3f} s, fsync+close {c:.3f} s, "
                      f"total {w + c:.3f} s", flush=True)
    print("medians (writes / close / total, seconds):")
    for name, rows in list(results.items()) + [("local+fsync", local)]:
        ws, cs = [r[0] for r in rows], [r[1] for r in rows]
        tot = [a + b for a, b in rows]
        print(f"  {name}: {statistics.median(ws):.3f} / {statistics.median(cs):.3f} / "
              f"{statistics.median(tot):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
