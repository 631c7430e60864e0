#!/usr/bin/python3
"""Checkpoint save and restore, side by side (issue 10's benchmark): one large file written with
1 MiB write(2)s, and a sharded checkpoint (torch.save of a state dict split into N shard files,
written one after another as a one-rank torch.distributed.checkpoint does), into:

  local+fsync        the local disk, each file fsync'd (the ceiling)
  local+upload       the local disk, then uploaded to the lake with boto3 (what the AWS CLI
                     does; the shards 8 at a time, as `aws s3 cp --recursive` does)
  cairn through      a `cairn up --write-mode through` mount (close: the file is in the lake)
  cairn back         a `--write-mode back` mount: close returns once the file is journaled on
                     the worker's disk; "back: in lake" adds the wait until every object is there
  s3fs               an s3fs mount (close uploads the file)
  rclone             an rclone mount, --vfs-cache-mode writes (close returns before the upload;
                     "rclone: in lake" adds the wait, as for write-back)

then restored (read back whole; the shards with torch.load) from Cairn cold (a fresh worker
cache: every byte from the lake), Cairn warm (the kernel page cache dropped, the worker cache
kept) and the local disk (page cache dropped). The lake is s3rver on this machine. Each state is
timed in every run, medians and ratios of one run. `--lake radosgw` runs the same
against a radosgw (tests/radosgw/radosgw.sh) instead of s3rver. Each save starts with the page cache dropped
and the machine idle (the uploads, cache fills and write-outs of the save before it finished).

A benchmark, not a test: it fails (exit 1) only if something reads back wrong or a process
misbehaves. Needs root (FUSE, drop_caches), the release build, s3fs, rclone and python3-torch:

    /usr/bin/python3 bench/checkpoint_bench.py [--size-mib 1024] [--shards 100] [--runs 3]
                                               [--out FILE.json] [--lake s3rver|radosgw]
                                               [--kinds file,sharded]

docs/benchmarks.md ("Checkpoint save and restore") has a recorded run.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, BENCH_DIR)

from conftest import S3_BUCKET, Harness, S3Server  # noqa: E402
from mounts import mount_rclone, mount_s3fs  # noqa: E402
from radosgw_lake import start_radosgw  # noqa: E402
from write_bench import start_s3rver  # noqa: E402

CHUNK = 1 << 20
SAVE_MODES = ("local+fsync", "local+upload", "cairn through", "cairn back", "back: in lake",
              "s3fs", "rclone", "rclone: in lake")
RESTORE_MODES = ("local read", "cairn cold", "cairn warm")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=1024, help="of each checkpoint")
    p.add_argument("--shards", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", help="write all runs and the summary here (JSON)")
    p.add_argument("--lake", choices=("s3rver", "radosgw"), default="s3rver",
                   help="radosgw: tests/radosgw/radosgw.sh, objects in RAM (see --lake-gib)")
    p.add_argument("--lake-gib", type=int, default=12,
                   help="radosgw's RAM for objects; a run puts about 5x the checkpoint's size "
                        "per kind in the lake, and the run before's objects are deleted")
    p.add_argument("--kinds", default="file,sharded",
                   help="which checkpoints: file (one large file), sharded, or both")
    args = p.parse_args(argv)
    args.kinds = [k for k in args.kinds.split(",") if k]
    if not args.kinds or any(k not in ("file", "sharded") for k in args.kinds):
        p.error("--kinds takes file, sharded or file,sharded")
    return args


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_busy_fraction(seconds):
    """Share of the machine's CPU time that was busy over the next `seconds`."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def settle(limit_s=30.0):
    """Drops the page cache and waits (at most `limit_s`) until the machine is nearly idle, so
    each save starts from the same state: no other system's background upload, cache fill or
    write-out still running (on 2 cores they would take the CPU the save needs)."""
    drop_caches()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and cpu_busy_fraction(0.5) > 0.15:
        pass


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def write_file(path, data, fsync):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        for i in range(0, len(data), CHUNK):
            os.write(fd, view[i:i + CHUNK])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def save_shards(torch, folder, shards, fsync):
    os.makedirs(folder, exist_ok=True)
    for i, shard in enumerate(shards):
        with open(os.path.join(folder, f"shard-{i:03d}.pt"), "wb") as f:
            torch.save(shard, f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())


def save(torch, kind, where, data, shards, fsync=False):
    if kind == "file":
        write_file(os.path.join(where, "model.bin"), data, fsync)
    else:
        save_shards(torch, os.path.join(where, "sharded"), shards, fsync)


def restore(torch, kind, where, data, shards):
    """Reads the checkpoint back and checks it."""
    if kind == "file":
        h = hashlib.sha256()
        with open(os.path.join(where, "model.bin"), "rb", buffering=0) as f:
            while chunk := f.read(4 * CHUNK):
                h.update(chunk)
        if h.hexdigest() != hashlib.sha256(data).hexdigest():
            raise AssertionError(f"{where}/model.bin reads back wrong")
        return
    for i, shard in enumerate(shards):
        got = torch.load(os.path.join(where, "sharded", f"shard-{i:03d}.pt"))
        for name, tensor in shard.items():
            if not torch.equal(got[name], tensor):
                raise AssertionError(f"{where}/sharded/shard-{i:03d}.pt: {name} differs")


def lake_keys(s3, prefix):
    keys, token = {}, None
    while True:
        kw = {"Bucket": S3_BUCKET, "Prefix": prefix}
        if token:
            kw["ContinuationToken"] = token
        page = s3.client.list_objects_v2(**kw)
        for o in page.get("Contents", []):
            keys[o["Key"]] = o["Size"]
        token = page.get("NextContinuationToken")
        if not token:
            return keys


def wait_in_lake(s3, prefix, kind, data, shards_dir, shard_count):
    """Returns once every object of the checkpoint is listed under `prefix` at its size."""
    while True:
        keys = lake_keys(s3, prefix)
        if kind == "file":
            if keys.get(prefix + "model.bin") == len(data):
                return
        else:
            want = {f"{prefix}sharded/shard-{i:03d}.pt":
                    os.path.getsize(os.path.join(shards_dir, f"shard-{i:03d}.pt"))
                    for i in range(shard_count)}
            if all(keys.get(k) == size for k, size in want.items()):
                return
        time.sleep(0.05)


def upload(s3, kind, local, prefix, shard_count):
    if kind == "file":
        s3.client.upload_file(os.path.join(local, "model.bin"), S3_BUCKET, prefix + "model.bin")
        return
    names = [f"shard-{i:03d}.pt" for i in range(shard_count)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: s3.client.upload_file(os.path.join(local, "sharded", n),
                                                      S3_BUCKET, f"{prefix}sharded/{n}"),
                      names))


def delete_run(s3, sub, local_dir):
    """Deletes one run's objects from the lake (every system's prefix) and its local copy."""
    keys = [k for k in lake_keys(s3, "") if f"/{sub}" in k]
    for i in range(0, len(keys), 1000):
        s3.client.delete_objects(Bucket=S3_BUCKET, Delete={
            "Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
    shutil.rmtree(local_dir, ignore_errors=True)


def main(argv):
    args = parse_args(argv)
    import torch
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} missing: build it (scripts/build.sh release)")
    data = os.urandom(args.size_mib * CHUNK)
    per_shard = args.size_mib * CHUNK // args.shards // 4  # float32 elements per shard
    gen = torch.Generator().manual_seed(1)
    shards = [{f"layer{i}.weight": torch.randn(per_shard // 2, generator=gen),
               f"layer{i}.bias": torch.randn(per_shard - per_shard // 2, generator=gen)}
              for i in range(args.shards)]
    runs, failures = [], []
    daemons = []
    with tempfile.TemporaryDirectory(prefix="cairn-ckpt-bench-", dir="/var/tmp") as work:
        harness = Harness(args.bin, work)
        s3proc = None
        try:
            if args.lake == "radosgw":
                s3proc, port = start_radosgw(work, args.lake_gib << 30)
            else:
                s3proc, port = start_s3rver(work)
            s3 = S3Server(port, s3proc)
            local = os.path.join(work, "local")
            os.makedirs(local)
            ups = {}
            for mode in ("through", "back"):
                ups[mode] = harness.up(f"s3://{S3_BUCKET}/{mode}", s3=s3, metrics=False,
                                       cache_dir=os.path.join(work, f"cache-{mode}"),
                                       cache_size=f"{4 * args.size_mib + 1024}MiB",
                                       extra=["--write-mode", mode], name=f"up-{mode}")
            s3fs, s3fs_mnt = mount_s3fs(work, port, "s3fs/")
            rclone, rclone_mnt = mount_rclone(work, port, "rclone/", cache_mode="writes")
            daemons += [s3fs, rclone]
            for run in range(args.runs):
                if run > 0:
                    # The last run's checkpoints are not read again: free the disk (a run writes
                    # about 10 times the checkpoint's size into the lake). Deleted only once
                    # no mount works under that prefix any more.
                    delete_run(s3, f"r{run - 1}/", os.path.join(local, f"r{run - 1}/"))
                for kind in args.kinds:
                    def note(mode, s):
                        runs.append({"run": run, "kind": kind, "mode": mode, "s": s})
                        print(f"run {run} {kind:<8} {mode:<16} {s:7.2f} s", flush=True)
                    sub = f"r{run}/"
                    where = {m: os.path.join(ups[m].mountpoint, sub) for m in ups}
                    for p in list(where.values()) + [os.path.join(s3fs_mnt, sub),
                                                     os.path.join(rclone_mnt, sub),
                                                     os.path.join(local, sub)]:
                        os.makedirs(p, exist_ok=True)
                    settle()
                    note("local+fsync", timed(lambda: save(torch, kind, os.path.join(local, sub),
                                                           data, shards, fsync=True)))
                    settle()
                    note("local+upload", timed(lambda: (
                        save(torch, kind, os.path.join(local, sub), data, shards),
                        upload(s3, kind, os.path.join(local, sub), f"upload/{sub}",
                               args.shards))))
                    settle()
                    note("cairn through", timed(lambda: save(torch, kind, where["through"], data,
                                                             shards)))
                    settle()
                    start = time.perf_counter()
                    save(torch, kind, where["back"], data, shards)
                    note("cairn back", time.perf_counter() - start)
                    wait_in_lake(s3, f"back/{sub}", kind, data,
                                 os.path.join(local, sub, "sharded"), args.shards)
                    note("back: in lake", time.perf_counter() - start)
                    # The peers: a failure is recorded (s3fs answered EIO once over s3rver)
                    # and the run goes on.
                    settle()
                    try:
                        note("s3fs", timed(lambda: save(torch, kind,
                                                        os.path.join(s3fs_mnt, sub), data,
                                                        shards)))
                    except OSError as e:
                        failures.append({"run": run, "kind": kind, "mode": "s3fs",
                                         "error": repr(e)})
                        print(f"run {run} {kind} s3fs failed: {e!r}", flush=True)
                    settle()
                    try:
                        start = time.perf_counter()
                        save(torch, kind, os.path.join(rclone_mnt, sub), data, shards)
                        note("rclone", time.perf_counter() - start)
                        wait_in_lake(s3, f"rclone/{sub}", kind, data,
                                     os.path.join(local, sub, "sharded"), args.shards)
                        note("rclone: in lake", time.perf_counter() - start)
                    except OSError as e:
                        failures.append({"run": run, "kind": kind, "mode": "rclone",
                                         "error": repr(e)})
                        print(f"run {run} {kind} rclone failed: {e!r}", flush=True)

                    # Restores. Local disk: page cache dropped.
                    drop_caches()
                    note("local read", timed(lambda: restore(torch, kind,
                                                             os.path.join(local, sub), data,
                                                             shards)))
                    # Cairn cold: a new worker with an empty cache, every byte from the lake.
                    ups["through"].stop()
                    shutil.rmtree(ups["through"].cache_dir, ignore_errors=True)
                    ups["through"] = harness.up(
                        f"s3://{S3_BUCKET}/through", s3=s3, metrics=False,
                        cache_dir=os.path.join(work, f"cache-cold-{run}-{kind}"),
                        cache_size=f"{4 * args.size_mib + 1024}MiB",
                        extra=["--write-mode", "through"], name=f"up-cold-{run}-{kind}")
                    where["through"] = os.path.join(ups["through"].mountpoint, sub)
                    drop_caches()
                    note("cairn cold", timed(lambda: restore(torch, kind, where["through"], data,
                                                             shards)))
                    drop_caches()
                    note("cairn warm", timed(lambda: restore(torch, kind, where["through"], data,
                                                             shards)))
        finally:
            for d in daemons:
                d.stop()
            errors = harness.cleanup()
            if s3proc is not None:
                s3proc.stop()
            if errors:
                print("cleanup:", errors, file=sys.stderr)
    report(args, runs, failures)
    return 0


def report(args, runs, failures):
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, Linux {platform.release()}"
    print(f"machine: {machine}")
    summary = {}
    for kind, label in (("file", f"one {args.size_mib} MiB file"),
                        ("sharded", f"{args.shards} torch.save shards, {args.size_mib} MiB")):
        if kind not in args.kinds:
            continue
        print(f"{label}: medians of {args.runs} runs")
        med = {}
        for mode in SAVE_MODES + RESTORE_MODES:
            times = [r["s"] for r in runs if r["kind"] == kind and r["mode"] == mode]
            if times:
                med[mode] = statistics.median(times)
                print(f"  {mode:<16} {med[mode]:7.2f} s {args.size_mib * 1.048576 / med[mode]:7.0f}"
                      " MB/s")
        ratios = {}
        for name, a, b in (("local+fsync / cairn back (>= 0.7)", "local+fsync", "cairn back"),
                           ("local+upload / cairn through (>= 1.0)", "local+upload",
                            "cairn through"),
                           ("s3fs / cairn through (>= 1.5)", "s3fs", "cairn through"),
                           ("cairn cold / cairn warm (>= 3)", "cairn cold", "cairn warm"),
                           ("local read / cairn warm (>= 0.9)", "local read", "cairn warm")):
            if a in med and b in med:
                ratios[name] = med[a] / med[b]
                print(f"  {name}: {ratios[name]:.2f}")
        summary[kind] = {"medians_s": med, "ratios": ratios}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": machine, "args": vars(args), "runs": runs,
                       "failures": failures, "summary": summary}, f, indent=1)
    for fail in failures:
        print(f"failed: run {fail['run']} {fail['kind']} {fail['mode']}: {fail['error']}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
