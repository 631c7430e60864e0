#!/usr/bin/python3
"""What creating a file costs on a write-back mount of an etcd cluster of 1 and of 3 workers
(all on this machine), through one `cairn fuse` client. With 3 workers, the lookup of each new
name is a stat that the source answers "no such file", and the worker answering it asks the
other two for files they hold pending under that name (protocol ListPending); with 1 worker
nobody is asked. The workers hold their files (--write-back-delay 10m), so no upload runs.

For each cluster size: a fresh etcd, the workers, `cairn mount add /wb file://FOLDER
--write-mode back`, a FUSE client, a new folder, then --files files of 1 KiB created one after
another (open O_CREAT|O_TRUNC, write, close), --rounds times in new folders; printed: ms per file
(median of the rounds) and a listing of the last folder through a second client.

Needs root (FUSE) and the release build:

    /usr/bin/python3 bench/cluster_create_cost.py [--files 200] [--rounds 3]

docs/benchmarks.md ("Listings of write-back mounts in a cluster") has a recorded run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import Harness  # noqa: E402
from cluster_util import Cluster, Etcd  # noqa: E402


def one_size(bin_path, work, workers, files, rounds):
    etcd = Etcd(os.path.join(work, "etcd"))
    etcd.start()
    harness = Harness(bin_path, work)
    try:
        cluster = Cluster(harness, etcd)
        for i in range(workers):
            cluster.start_worker(f"w{i + 1}", extra=["--write-back-delay", "10m"])
        cluster.wait_ring_settled()
        src = os.path.join(work, "src")
        os.makedirs(src)
        cluster.mount_add("/wb", f"file://{src}", "--write-mode", "back")
        fuse = cluster.fuse(name="writer")
        per_file = []
        data = b"x" * 1024
        for r in range(rounds):
            folder = os.path.join(fuse.mountpoint, "wb", f"round-{r}")
            os.mkdir(folder)
            start = time.perf_counter()
            for i in range(files):
                with open(os.path.join(folder, f"f{i:04d}"), "wb") as f:
                    f.write(data)
            per_file.append((time.perf_counter() - start) / files * 1000)
        reader = cluster.fuse(name="reader")
        listed = len(os.listdir(os.path.join(reader.mountpoint, "wb", f"round-{rounds - 1}")))
        failures = sum(cluster.metric(w, "cairn_worker_peer_pending_failures_total")
                       for w in cluster.workers)
        print(f"{workers} worker(s): {statistics.median(per_file):.2f} ms per file "
              f"(rounds {', '.join(f'{v:.2f}' for v in per_file)}); another client lists "
              f"{listed} of {files}; peers left out: {failures:.0f}")
    finally:
        errors = harness.cleanup()
        etcd.stop()
        if errors:
            print("\n".join(errors), file=sys.stderr)
            return False
    return True


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--files", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} missing: build it (scripts/build.sh release)")
    ok = True
    for workers in (1, 3):
        with tempfile.TemporaryDirectory(prefix=f"cairn-create-{workers}-", dir="/var/tmp") as w:
            ok = one_size(args.bin, w, workers, args.files, args.rounds) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
