#!/usr/bin/python3
"""The checkpoint idiom on a write-back mount in a cluster: save under a temporary name, then
rename to the final one (os.replace), as torch.save wrappers, Lightning and DeepSpeed do.

Three `cairn worker`s in a private etcd, one `cairn fuse` client, the lake in s3rver, all on this
machine; a write-back mount (the default 1 s commit delay). Each round writes --files files of
--size-mib MiB under `<name>.tmp` (1 MiB write(2)s), closes, renames each to `<name>`, and
times the close and the rename separately; then waits for `cairn sync` and checks every object
in the lake. With three workers about two renames in three cross owners: a cross-owner rename
is passed to the new name's owner (protocol v12 HandOver) by builds that have it; older ones
upload the file under the temporary name first, then copy it in the source.

Run it with each binary to compare (same machine, one after the other, each its own cluster):

    /usr/bin/python3 bench/cluster_rename_bench.py --cairn-bin build/cairn \\
        [--cairn-bin /tmp/cairn-old] [--size-mib 256] [--files 6] [--rounds 3]

Prints, per binary, the median rename time of the renames that crossed owners and of those
that did not (owner of each name from the workers' metrics), and the median close; writes the
raw values to bench/results/cluster-rename-<time>.json. A benchmark, not a test: it fails only
if a process misbehaves or an object in the lake is wrong. Needs root (FUSE).
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

from conftest import S3_BUCKET, S3_KEY, S3_SECRET, Harness, start_s3server  # noqa: E402
from cluster_util import Cluster, Etcd  # noqa: E402

MIB = 1 << 20
MOUNT = "/wb"
PASSED = "cairn_worker_write_back_hand_overs_total"
UPLOADS = "cairn_worker_write_back_commits_total"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", action="append", help="binary to measure (repeatable)")
    p.add_argument("--size-mib", type=int, default=256, help="size of each file (default 256)")
    p.add_argument("--files", type=int, default=6, help="files per round (default 6)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per binary (default 3)")
    p.add_argument("--settle", type=float, default=0.0,
                   help="before each round: sync(2), then wait this many seconds (default 0)")
    p.add_argument("--workdir-base", default=tempfile.gettempdir())
    p.add_argument("--out", help="JSON file (default bench/results/cluster-rename-<time>.json)")
    a = p.parse_args(argv)
    a.cairn_bin = [os.path.abspath(b) for b in (a.cairn_bin or [os.path.join(REPO, "build",
                                                                            "cairn")])]
    if a.size_mib < 1 or a.files < 1 or a.rounds < 1:
        p.error("need --size-mib, --files and --rounds >= 1")
    return a


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def block(i, size):
    """1 MiB of data that names its file and offset (a misplaced block shows)."""
    head = f"{i}:{size}:".encode()
    return (head * (MIB // len(head) + 1))[:MIB]


def write_file(path, i, size_mib):
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for k in range(size_mib):
            b = block(i * 100000 + k, size_mib)
            digest.update(b)
            f.write(b)
        t0 = time.monotonic()
    closed = time.monotonic() - t0  # The close(2) alone: write-back journals the file here.
    return digest.hexdigest(), closed


def measure(args, binary, workdir):
    os.environ["AWS_ACCESS_KEY_ID"] = S3_KEY
    os.environ["AWS_SECRET_ACCESS_KEY"] = S3_SECRET
    s3root = os.path.join(workdir, "s3")
    os.makedirs(s3root)
    s3 = start_s3server(s3root)
    etcd = Etcd(os.path.join(workdir, "etcd")).start()
    h = Harness(binary, os.path.join(workdir, "h"))
    cache = f"{args.size_mib * args.files * 2 + 512}MiB"
    # Every file of a round may wait at one worker, plus one passed on (both copies count).
    budget = f"{args.size_mib * (args.files + 1) + 64}MiB"
    cluster = Cluster(h, etcd, lease_ttl=5, cache_size=cache)
    samples = {"crossed": [], "same": [], "uploaded": [], "not uploaded": [], "close": [],
               "sync": []}
    try:
        for i in (1, 2, 3):
            cluster.start_worker(f"w{i}", extra=["--write-back-delay", "10m",
                                                 "--write-back-budget", budget])
        cluster.wait_ring_settled()
        cluster.mount_add(MOUNT, f"s3://{S3_BUCKET}/ckpt", "--endpoint", s3.endpoint,
                          "--region", "us-east-1", "--write-mode", "back")
        fuse = cluster.fuse(name="writer")
        folder = os.path.join(fuse.mountpoint, MOUNT.lstrip("/"))
        for r in range(args.rounds):
            if args.settle > 0:
                os.sync()  # The last round's uploads and cache fills, on disk.
                time.sleep(args.settle)
            expected = {}
            for n in range(args.files):
                name = f"round{r}/step-{n:03d}.pt"
                os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
                temporary = os.path.join(folder, name + ".tmp")
                digest, closed = write_file(temporary, r * 1000 + n, args.size_mib)
                samples["close"].append(closed)
                before = counts(cluster)
                t0 = time.monotonic()
                os.replace(temporary, os.path.join(folder, name))
                took = time.monotonic() - t0
                after = counts(cluster)
                # Nothing is uploaded but by a rename here (the commit delay is 10 minutes):
                # one that passed the file on, or uploaded it first, crossed owners.
                crossed = after[0] > before[0] or after[1] > before[1]
                samples["crossed" if crossed else "same"].append(took)
                samples["uploaded" if after[1] > before[1] else "not uploaded"].append(took)
                expected[name] = digest
            t0 = time.monotonic()
            r_sync = cluster.cli(["sync", MOUNT, "--timeout", "600s"], timeout=700)
            if r_sync.returncode != 0:
                raise RuntimeError(f"cairn sync: {r_sync.stderr.decode(errors='replace')}")
            samples["sync"].append(time.monotonic() - t0)
            for name, digest in expected.items():
                body = s3.client.get_object(Bucket=S3_BUCKET, Key=f"ckpt/{name}")["Body"].read()
                if hashlib.sha256(body).hexdigest() != digest:
                    raise RuntimeError(f"{name}: wrong bytes in the lake")
                tmp = s3.client.list_objects_v2(Bucket=S3_BUCKET, Prefix=f"ckpt/{name}.tmp")
                if tmp.get("KeyCount", 0):
                    raise RuntimeError(f"{name}.tmp left in the lake")
            log(f"{os.path.basename(binary)} round {r}: renames "
                + ", ".join(f"{k} {[round(x, 3) for x in v]}" for k, v in samples.items()
                            if k in ("crossed", "same")))
    finally:
        for e in h.cleanup():
            log(f"cleanup: {e}")
        etcd.stop()
        s3.proc.stop()
    return samples


def counts(cluster):
    """(files passed on, files uploaded) by all workers so far."""
    passed = uploaded = 0
    for w in cluster.workers:
        passed += cluster.metric(w, PASSED) or 0  # None: a build without HandOver.
        uploaded += cluster.metric(w, UPLOADS) or 0
    return passed, uploaded


def main(argv):
    args = parse_args(argv)
    results = {}
    for binary in args.cairn_bin:
        with tempfile.TemporaryDirectory(dir=args.workdir_base, prefix="rename-bench-") as wd:
            log(f"{binary}: 3 workers, {args.rounds} x {args.files} files of {args.size_mib} MiB")
            results[binary] = measure(args, binary, wd)
    med = {b: {k: statistics.median(v) for k, v in s.items() if v} for b, s in results.items()}
    for b, m in med.items():
        print(f"{b}: " + ", ".join(f"{k} {v:.3f} s" for k, v in m.items()))
    out = args.out or os.path.join(REPO, "bench", "results",
                                   time.strftime("cluster-rename-%Y%m%d-%H%M%S.json"))
    with open(out, "w") as f:
        json.dump({"args": vars(args), "machine": platform.node(), "samples": results,
                   "medians": med}, f, indent=1)
    print(f"raw values: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
