#!/usr/bin/python3
"""Cache-aware sampler benchmark (issue 11): source bytes and time per epoch of a PyTorch
DataLoader over a dataset twice the cache's size, plain shuffling against
cairn.torch.CacheAwareSampler, all through the Python SDK (no mount).

One `cairn worker` (LRU eviction, --cache-size MiB) serves an s3rver bucket holding
--files files of --file-kib KiB (the dataset, 2x the cache by default). For each sampler a
fresh worker starts on an empty cache; the DataLoader (num_workers 2, batch 16, every sample's
length checked) runs --epochs epochs; epoch 1 fills the cache and is reported apart, the
following ones are the steady state. Per epoch: bytes the worker read from the source
(cairn_worker_bytes_from_ufs_total, prefetches included) and wall time.

Samplers: `shuffle` (a new random permutation per epoch, what RandomSampler does),
`aware-W` (CacheAwareSampler, window W; `aware-all`: one window per epoch), `aware-W-noprefetch`
(the same without loading ahead). Each DataLoader worker's client has a --client-buffer MiB
page buffer: the default 256 MiB would hold most of this small dataset in the workers' own
memory and hide the cache's behaviour.

    /usr/bin/python3 bench/sampler_bench.py [--files 384] [--file-kib 256] [--cache-size 48]
        [--epochs 4] [--windows 64,all,64:off,all:off] [--client-buffer 4]

A benchmark, not a test: it exits 1 only if a sample comes back with the wrong length or a
command fails. docs/benchmarks.md ("Cache-aware sampler") has a recorded run.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "build", "python"))

from conftest import S3_BUCKET, S3_KEY, S3_SECRET, Harness, start_s3server  # noqa: E402

MIB = 1 << 20


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--files", type=int, default=384)
    p.add_argument("--file-kib", type=int, default=256)
    p.add_argument("--cache-size", type=int, default=48, help="worker cache, MiB")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--windows", default="64,all,64:off,all:off",
                   help="CacheAwareSampler windows; W:off = without prefetching")
    p.add_argument("--client-buffer", type=int, default=4, help="client page buffer, MiB")
    p.add_argument("--workdir", default=None)
    return p.parse_args(argv)


def start_s3(workdir, files, size):
    root = os.path.join(workdir, "s3rver")
    os.makedirs(root)
    s3 = start_s3server(root)
    rng = random.Random(1)
    for i in range(files):
        s3.put(f"samples/s{i:05d}.bin", rng.randbytes(size))
    return s3


def run_sampler(args, harness, s3, name, window, prefetch):
    import cairn
    import torch.utils.data as tud
    from cairn.torch import CacheAwareSampler, CairnDataset

    mount = {"path": "/lake", "uri": f"s3://{S3_BUCKET}/samples",
             "options": {"endpoint": s3.endpoint, "region": "us-east-1", "access_key": S3_KEY,
                         "secret_key": S3_SECRET}}
    config_path = os.path.join(harness.workdir, f"{name}.json")
    with open(config_path, "w") as f:
        json.dump({"mounts": [mount]}, f)
    cache = harness.new_dir(f"cache-{name}")
    w = harness.worker([], cache, cache_size=f"{args.cache_size}MiB", name=f"w-{name}",
                       extra=["--config", config_path])
    client = cairn.connect(config={"mounts": [mount],
                                   "workers": [f"127.0.0.1:{w.listen_port}"]},
                           buffer_size=args.client_buffer * MIB)
    ds = CairnDataset("/lake", decode=len, client=client)
    want = args.file_kib << 10
    if window is None:
        sampler = tud.RandomSampler(ds, generator=None)
    else:
        sampler = CacheAwareSampler(ds, window=len(ds) if window == "all" else int(window),
                                    prefetch=prefetch)
    loader = tud.DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2,
                            collate_fn=list, multiprocessing_context="fork",
                            persistent_workers=True)
    epochs = []
    for epoch in range(args.epochs):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        before = w.metric("cairn_worker_bytes_from_ufs_total")
        t0 = time.monotonic()
        n = 0
        for batch in loader:
            for length in batch:
                if length != want:
                    raise SystemExit(f"{name}: a sample of {length} bytes, not {want}")
                n += 1
        seconds = time.monotonic() - t0
        if n != len(ds):
            raise SystemExit(f"{name}: {n} samples in an epoch of {len(ds)}")
        source = w.metric("cairn_worker_bytes_from_ufs_total") - before
        epochs.append({"epoch": epoch + 1, "seconds": seconds, "source_mib": source / MIB})
        print(f"  {name:22s} epoch {epoch + 1}: {seconds:6.2f} s, "
              f"{source / MIB:7.1f} MiB from the source", flush=True)
    del loader
    client.close()
    w.stop()
    return epochs


def main(argv):
    args = parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="cairn-sampler-bench-")
    harness = Harness(args.cairn_bin, workdir)
    try:
        dataset_mib = args.files * args.file_kib / 1024
        print(f"dataset {args.files} x {args.file_kib} KiB = {dataset_mib:.0f} MiB, cache "
              f"{args.cache_size} MiB, {args.epochs} epochs; work dir {workdir}", flush=True)
        s3 = start_s3(workdir, args.files, args.file_kib << 10)
        samplers = [("shuffle", None, False)]
        for spec in args.windows.split(","):
            window, _, off = spec.partition(":")
            name = f"aware-{window}" + ("-noprefetch" if off else "")
            samplers.append((name, window, not off))
        results = {}
        for name, window, prefetch in samplers:
            results[name] = run_sampler(args, harness, s3, name, window, prefetch)
        print("\nsteady state (epochs 2..N, medians):")
        print(f"{'sampler':22s} {'MiB from source':>16s} {'of dataset':>11s} {'epoch s':>8s} "
              f"{'vs shuffle (bytes, time)':>26s}")
        base = None
        for name, epochs in results.items():
            rest = epochs[1:] or epochs
            mib = statistics.median(e["source_mib"] for e in rest)
            sec = statistics.median(e["seconds"] for e in rest)
            if base is None:
                base = (mib, sec)
            print(f"{name:22s} {mib:16.1f} {mib / dataset_mib:10.0%} {sec:8.2f} "
                  f"{mib / base[0] if base[0] else 0:12.2f}x {sec / base[1]:10.2f}x")
        print(json.dumps(results))
        s3.proc.stop()
    finally:
        harness.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
