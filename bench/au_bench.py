#!/usr/bin/python3
"""Emulated accelerator utilisation (issue 11), modelled on MLPerf Storage (DLIO): each emulated
accelerator is a process that loads batches through a PyTorch DataLoader and sleeps for the
model's compute time per batch; accelerator utilisation AU = compute time / wall time (from the
DataLoader's start to its last batch); a run passes when the mean AU of its accelerators is at
least 90%. For each access path, the number of accelerators grows 1, 2, 3, ... until a run
fails: the largest passing count is what the path sustains on this machine.

Workloads (MLPerf Storage v1.0 H100 shapes, fewer files to fit this machine):
  resnet50  samples of 114,660 bytes, batch 400, 0.224 s of compute per batch
  unet3d    files of about 146.6 MB (sizes vary +-10%), batch 7, 0.323 s per batch

Access paths, all on warm data (each warmed by reading the dataset once through it, and for
Cairn until the worker's cache stops growing; the kernel page cache dropped before every run):
  local       the files on the local disk (the ceiling)
  cairn-sdk   cairn.connect() to the `cairn up` node, client.open(..., buffering=0).readinto
  cairn-sdk-batch  the same client, each DataLoader worker fetching a whole batch with one
              client.read_many (parallel reads on C++ threads; a BatchSampler hands the
              worker the batch's indices, as Debian's torch 1.13 has no __getitems__)
  cairn-dataset  cairn.torch.CairnDataset over the workload's folder (listed when the dataset is
              made, in the accelerator's process; its forked DataLoader workers start with that
              listing) reading each sample with client.read_range, decode=len
  cairn-fuse  the same node's FUSE mount
  s3fs        s3fs with its local file cache (use_cache)
  rclone      rclone mount --vfs-cache-mode full
  direct      boto3 GetObject per sample (no cache: warm is cold)
The lake is s3rver on this machine. A sample is read whole into a buffer the DataLoader worker
reuses; the batch handed to the accelerator is the sum of the sample lengths (checked), so what
is timed is storage, not pickling samples between processes.

A benchmark, not a test: it exits 1 only if a sample comes back with the wrong length or a
process fails. Needs root (FUSE, drop_caches), the release build with the Python SDK
(build/python), s3fs, rclone and python3-torch:

    /usr/bin/python3 bench/au_bench.py [--workloads resnet50,unet3d] [--paths ...]
        [--resnet-files 6000] [--unet-files 12] [--resnet-steps 5] [--unet-steps 2]
        [--num-workers 2] [--max-accel 8]
        [--out FILE.json]

docs/benchmarks.md ("Emulated accelerator utilisation") has a recorded run.
"""
import argparse
import json
import multiprocessing
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "build", "python"))
sys.path.insert(0, BENCH_DIR)

from conftest import S3_BUCKET, S3_KEY, S3_SECRET, Harness, free_port, start_s3server  # noqa
from mounts import mount_rclone, mount_s3fs  # noqa: E402

ALL_PATHS = ("local", "cairn-sdk", "cairn-sdk-batch", "cairn-dataset", "cairn-fuse", "s3fs",
             "rclone", "direct")
BATCHED = ("cairn-sdk-batch",)  # A DataLoader worker fetches a whole batch in one call.
PREFIX = "au"
PASS_AU = 0.90


class Workload:
    def __init__(self, name, sizes, batch, compute_s, steps):
        self.name, self.sizes, self.batch, self.compute_s = name, sizes, batch, compute_s
        self.steps = steps  # Batches per accelerator per run.

    def rel(self, i):
        return f"{self.name}/sample-{i:06d}.bin"


def workloads(args):
    rnd = random.Random(11)
    out = {
        "resnet50": Workload("resnet50", [114_660] * args.resnet_files, 400, 0.224,
                             args.resnet_steps),
        "unet3d": Workload("unet3d", [int(146_600_000 * rnd.uniform(0.9, 1.1))
                                      for _ in range(args.unet_files)], 7, 0.323,
                           args.unet_steps),
    }
    return [out[w] for w in args.workloads]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--workloads", default="resnet50,unet3d", type=lambda s: s.split(","))
    p.add_argument("--paths", default=",".join(ALL_PATHS), type=lambda s: s.split(","))
    p.add_argument("--resnet-files", type=int, default=6000)
    p.add_argument("--unet-files", type=int, default=12)
    p.add_argument("--resnet-steps", type=int, default=5,
                   help="resnet50 batches per accelerator per run")
    p.add_argument("--unet-steps", type=int, default=2,
                   help="unet3d batches per accelerator per run")
    p.add_argument("--num-workers", type=int, default=2, help="DataLoader workers per accelerator")
    p.add_argument("--max-accel", type=int, default=8)
    p.add_argument("--out", help="write every run and the summary here (JSON)")
    args = p.parse_args(argv)
    for path in args.paths:
        if path not in ALL_PATHS:
            p.error(f"unknown path {path}; known: {', '.join(ALL_PATHS)}")
    return args


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


# ------------------------------------------------------------------------------------------
# What a DataLoader worker runs (after the fork: each opens its own connections).
# ------------------------------------------------------------------------------------------

class SampleSet:
    """Map-style dataset: item i is the length of sample `rels[i]`, read whole through `path`."""

    def __init__(self, path, where, rels, sizes, sdk_config):
        self.path, self.where, self.rels, self.sizes = path, where, rels, sizes
        self.sdk_config = sdk_config
        self._conn = None
        self._buf = None

    def __len__(self):
        return len(self.rels)

    def _connection(self):
        if self._conn is None:
            if self.path in ("cairn-sdk", "cairn-sdk-batch"):
                import cairn
                self._conn = cairn.connect(**self.sdk_config)
            elif self.path == "direct":
                import boto3
                self._conn = boto3.client(
                    "s3", endpoint_url=self.where, region_name="us-east-1",
                    aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET)
        return self._conn

    def __getitem__(self, i):
        if isinstance(i, list):  # A whole batch (BATCHED paths).
            got = self._connection().read_many([("/" + self.rels[k], 0, -1) for k in i])
            for k, data in zip(i, got):
                if len(data) != self.sizes[k]:
                    raise RuntimeError(f"{self.path}: {self.rels[k]} read {len(data)} bytes")
            return sum(len(data) for data in got)
        rel, size = self.rels[i], self.sizes[i]
        if self._buf is None or len(self._buf) < size:
            self._buf = bytearray(size)
        view = memoryview(self._buf)[:size]
        if self.path == "direct":
            body = self._connection().get_object(Bucket=S3_BUCKET, Key=f"{PREFIX}/{rel}")["Body"]
            n = len(body.read())
        else:
            if self.path in ("cairn-sdk", "cairn-sdk-batch"):
                f = self._connection().open("/" + rel, "rb", buffering=0)
            else:
                f = open(os.path.join(self.where, rel), "rb", buffering=0)
            with f:
                n = 0
                while n < size:
                    got = f.readinto(view[n:])
                    if not got:
                        break
                    n += got
        if n != size:
            raise RuntimeError(f"{self.path}: {rel} read {n} bytes, expected {size}")
        return n


def sum_lengths(batch):
    return sum(batch)


def accelerator(rank, count, workload, path, where, sdk_config, num_workers, barrier, results):
    import torch.utils.data as tud
    n = len(workload.sizes)
    per = workload.steps * workload.batch
    order = list(range(n))
    random.Random(0).shuffle(order)  # One shuffled epoch order, shared by the accelerators.
    # Accelerators read disjoint slices of it (as DLIO shards an epoch), wrapping around only
    # when the dataset holds fewer than count * steps * batch samples.
    picks = [order[(rank * per + k) % n] for k in range(per)]
    if path == "cairn-dataset":
        import cairn
        import cairn.torch
        ds = cairn.torch.CairnDataset(prefix="/" + workload.name, decode=len,
                                      client=cairn.connect(**sdk_config))
        if ds.paths != ["/" + workload.rel(i) for i in range(n)]:
            raise RuntimeError("cairn-dataset: the listing is not the dataset")
    else:
        ds = SampleSet(path, where, [workload.rel(i) for i in range(n)], workload.sizes,
                       sdk_config)
    if path in BATCHED:
        loader = tud.DataLoader(ds, batch_size=None,
                                sampler=tud.BatchSampler(picks, workload.batch, drop_last=False),
                                num_workers=num_workers)
    else:
        loader = tud.DataLoader(ds, batch_size=workload.batch, sampler=picks,
                                num_workers=num_workers, collate_fn=sum_lengths)
    barrier.wait()
    start = time.perf_counter()
    compute = 0.0
    total = 0
    for got in loader:
        total += got
        time.sleep(workload.compute_s)
        compute += workload.compute_s
    wall = time.perf_counter() - start
    expected = sum(workload.sizes[i] for i in picks)
    results.put({"rank": rank, "au": compute / wall, "wall_s": wall, "bytes": total,
                 "ok": total == expected})


def run_count(args, workload, path, where, sdk_config, count):
    """One run of `count` accelerators; the mean AU and per-accelerator details."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(count)
    results = ctx.Queue()
    procs = [ctx.Process(target=accelerator,
                         args=(rank, count, workload, path, where, sdk_config,
                               args.num_workers, barrier, results))
             for rank in range(count)]
    drop_caches()
    for p in procs:
        p.start()
    got = [results.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"{path}: an accelerator exited with {p.exitcode}")
    if not all(r["ok"] for r in got):
        raise RuntimeError(f"{path}: samples came back with wrong lengths")
    mean_au = statistics.mean(r["au"] for r in got)
    gbps = sum(r["bytes"] for r in got) / max(r["wall_s"] for r in got) / 1e9
    return {"count": count, "au": mean_au, "min_au": min(r["au"] for r in got), "GBps": gbps}


def warm(path, where, workload, sdk_config):
    """Reads the dataset once through `path` (fills the path's cache), 4 samples at a time."""
    if path == "cairn-dataset":
        path = "cairn-sdk"  # The same node and cache.
    import concurrent.futures
    import threading
    # One SampleSet per thread: a SampleSet's read buffer is its own (a DataLoader worker has
    # one), and threads sharing it would overwrite each other's samples mid-read (a Cairn client
    # that verifies in the caller's memory then reports checksum mismatches and refetches).
    local = threading.local()

    def read(i):
        if not hasattr(local, "ds"):
            local.ds = SampleSet(path, where, [workload.rel(k) for k in range(len(workload.sizes))],
                                 workload.sizes, sdk_config)
        return local.ds[i]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(read, range(len(workload.sizes))))


def wait_stored(up):
    """Waits until the worker's cache stops growing (its page stores have drained)."""
    last, still = -1.0, 0
    while still < 4:
        used = up.metric("cairn_cache_used_bytes")
        still = still + 1 if used == last else 0
        last = used
        time.sleep(0.5)


# ------------------------------------------------------------------------------------------
# Set-up and the run.
# ------------------------------------------------------------------------------------------

def make_dataset(root, loads):
    rnd = random.Random(5)
    for w in loads:
        os.makedirs(os.path.join(root, w.name), exist_ok=True)
        block = rnd.randbytes(1 << 20)
        for i, size in enumerate(w.sizes):
            with open(os.path.join(root, w.rel(i)), "wb") as f:
                # Distinct bytes per file (a rotating slice of one random block), cheap to make.
                off = (i * 7919) % len(block)
                rot = block[off:] + block[:off]
                done = 0
                while done < size:
                    piece = rot[:size - done]
                    f.write(piece)
                    done += len(piece)


def main(argv):
    args = parse_args(argv)
    loads = workloads(args)
    runs, summary = [], {}
    with tempfile.TemporaryDirectory(prefix="cairn-au-bench-", dir="/var/tmp") as work:
        harness = Harness(args.cairn_bin, work)
        daemons, s3 = [], None
        try:
            local = os.path.join(work, "local")
            make_dataset(local, loads)
            s3 = start_s3server(work)
            s3.upload_tree(local, PREFIX, threads=8)
            total = sum(sum(w.sizes) for w in loads)
            where = {"local": local, "direct": s3.endpoint}
            sdk_config = {}
            if {"cairn-sdk", "cairn-sdk-batch", "cairn-dataset", "cairn-fuse"} & set(args.paths):
                port = free_port()
                up = harness.up(f"s3://{S3_BUCKET}/{PREFIX}", s3=s3,
                                cache_size=f"{total // (1 << 20) * 2 + 1024}MiB",
                                extra=["--listen", f"127.0.0.1:{port}"], name="up-au")
                where["cairn-fuse"] = up.mountpoint
                where["cairn-sdk"] = where["cairn-sdk-batch"] = where["cairn-dataset"] = ""
                sdk_config = {"workers": [f"127.0.0.1:{port}"],
                              "mounts": {"/": {"uri": f"s3://{S3_BUCKET}/{PREFIX}",
                                               "options": {"endpoint": s3.endpoint,
                                                           "region": "us-east-1",
                                                           "access_key": S3_KEY,
                                                           "secret_key": S3_SECRET}}}}
            if "s3fs" in args.paths:
                d, where["s3fs"] = mount_s3fs(work, s3.port, PREFIX, read_only=True)
                daemons.append(d)
            if "rclone" in args.paths:
                d, where["rclone"] = mount_rclone(work, s3.port, PREFIX, cache_mode="full",
                                                  read_only=True)
                daemons.append(d)
            for w in loads:
                summary[w.name] = {}
                for path in args.paths:
                    if path != "direct":
                        t = time.perf_counter()
                        warm(path, where[path], w, sdk_config)
                        if path.startswith("cairn"):
                            # The worker stores fetched pages after replying: until its page
                            # files are written, readers on this machine cannot read them
                            # directly (short-circuit) and go through the worker.
                            wait_stored(up)
                        print(f"{w.name} {path}: warmed in {time.perf_counter() - t:.1f} s",
                              flush=True)
                    passed, results = 0, []
                    for count in range(1, args.max_accel + 1):
                        r = run_count(args, w, path, where[path], sdk_config, count)
                        r.update(workload=w.name, path=path)
                        runs.append(r)
                        results.append(r)
                        print(f"{w.name} {path}: {count} accelerator(s) AU {r['au']:.1%} "
                              f"(min {r['min_au']:.1%}) {r['GBps']:.2f} GB/s", flush=True)
                        if r["au"] < PASS_AU:
                            break
                        passed = count
                    summary[w.name][path] = {"max_accelerators": passed,
                                             "au_at_1": results[0]["au"]}
        finally:
            for d in daemons:
                d.stop()
            errors = harness.cleanup()
            if s3 is not None:
                s3.proc.stop()
            if errors:
                print("cleanup:", errors, file=sys.stderr)
    report(args, runs, summary)
    return 0


def report(args, runs, summary):
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, Linux {platform.release()}"
    print(f"machine: {machine}")
    for name, paths in summary.items():
        print(f"{name}: accelerators sustained at AU >= 90% (AU with 1 accelerator)")
        for path, s in paths.items():
            print(f"  {path:<11} {s['max_accelerators']:3d}   ({s['au_at_1']:.1%})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": machine, "args": vars(args), "runs": runs,
                       "summary": summary}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
