#!/usr/bin/python3
"""Cairn read benchmark: Cairn's FUSE mount side by side with s3fs, rclone, direct S3 GETs and a
local-disk copy, on the same data in one s3rver bucket, in one run.

A benchmark, not a test: it never fails on numbers, it prints them, the ratios against the
baselines measured in the same run, and PASS/MISS per target of the issue. See docs/benchmarks.md.

Run as root (it drops the kernel page cache) with Debian's interpreter:
    /usr/bin/python3 bench/read_bench.py [--quick] [--systems cairn,s3fs,...]
"""
import argparse
import atexit
import datetime
import glob
import json
import math
import os
import random
import shlex
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from readbench import dataset, machine, procs, report, systems, workloads  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
BUCKET = "cairn-bench"
MIB = workloads.MIB
GIB = 1 << 30
ALL_WORKLOADS = ("small_x1", "small_x8", "large_x1", "large_x8", "fio", "dataloader")
RUN_ORDER = ("local", "direct", "cairn", "s3fs", "rclone")
# Cairn counters worth a delta per measurement (the rest stay in the JSON).
CAIRN_COUNTERS = {
    "hits": "cairn_worker_cache_hits_total",
    "misses": "cairn_worker_cache_misses_total",
    "ufs_MB": "cairn_worker_bytes_from_ufs_total",
    "ufs_req": "cairn_worker_ufs_requests_total",
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small dataset for development: 100 x 1 MiB, 2 x 32 MiB, fio 3 s")
    p.add_argument("--systems", default=",".join(systems.ALL_SYSTEMS),
                   help="comma-separated subset of " + ",".join(systems.ALL_SYSTEMS))
    p.add_argument("--workloads", default=",".join(ALL_WORKLOADS),
                   help="comma-separated subset of " + ",".join(ALL_WORKLOADS))
    p.add_argument("--repeats", type=int, default=3, help="warm/hot runs per workload (median)")
    p.add_argument("--small-files", type=int, help="number of 1 MiB files (default 1000)")
    p.add_argument("--large-files", type=int, help="number of large files (default 4)")
    p.add_argument("--large-mib", type=int, help="large file size in MiB (default 256)")
    p.add_argument("--fio-runtime", type=int, help="fio seconds per system (default 10)")
    p.add_argument("--direct-client", choices=("curl", "boto3"), default="curl",
                   help="client for the direct-GET baseline (default curl: native, the stricter)")
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--cairn-arg", action="append", default=[],
                   help="extra argument for `cairn up` (repeat), e.g. --cairn-arg=--threads=32")
    p.add_argument("--s3rver-js",
                   default=os.path.join(REPO, "node_modules", "s3rver", "bin", "s3rver.js"))
    p.add_argument("--workdir-base", default="/tmp",
                   help="where /tmp/cairn-bench-<pid> goes; it must be a real disk, not tmpfs")
    p.add_argument("--results-dir", default=os.path.join(BENCH_DIR, "results"))
    p.add_argument("--measure-timeout", type=float, default=900,
                   help="seconds before a hung measurement's daemon is killed")
    p.add_argument("--keep-workdir", action="store_true", help="leave data, caches and logs")
    a = p.parse_args(argv)
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    a.workloads = [w.strip() for w in a.workloads.split(",") if w.strip()]
    bad = [s for s in a.systems if s not in systems.ALL_SYSTEMS]
    bad += [w for w in a.workloads if w not in ALL_WORKLOADS]
    if bad:
        p.error(f"unknown system/workload: {', '.join(bad)}")
    if a.repeats < 1:
        p.error("--repeats must be >= 1")
    a.small_files = a.small_files or (100 if a.quick else 1000)
    # 8: the large_x8 workload gives each of its 8 readers a file of its own.
    a.large_files = a.large_files or (2 if a.quick else 8)
    a.large_mib = a.large_mib or (32 if a.quick else 256)
    a.fio_runtime = a.fio_runtime or (3 if a.quick else 10)
    return a


# Set by the SIGTERM/SIGHUP handler. The handler raises SystemExit, but C code (e.g. torch's import)
# may turn that into another exception that a per-system `except Exception` would swallow; the
# flag makes every such handler re-raise and stops the run at the next measurement.
_stop_signal = []


def check_stop():
    if _stop_signal:
        raise SystemExit(128 + _stop_signal[0])


class Output:
    """Prints a line and keeps it for the results text file."""

    def __init__(self):
        self.lines = []

    def __call__(self, text=""):
        print(text, flush=True)
        self.lines.append(text)


def check_prerequisites(args):
    problems = []
    if os.geteuid() != 0:
        problems.append("run as root: cold/warm runs drop the kernel page cache")
    need = {"fio": "fio" in args.workloads, "fusermount3": True,
            "curl": "direct" in args.systems and args.direct_client == "curl"}
    if set(args.systems) & {"cairn", "s3fs", "rclone", "direct"}:
        need["node"] = True
        if not os.path.exists(args.s3rver_js):
            problems.append(f"s3rver not found at {args.s3rver_js} (npm ci in {REPO})")
    need["s3fs"] = "s3fs" in args.systems
    need["rclone"] = "rclone" in args.systems
    for tool, needed in need.items():
        if needed and shutil.which(tool) is None:
            problems.append(f"{tool} is not installed")
    if "cairn" in args.systems and not os.access(args.cairn_bin, os.X_OK):
        problems.append(f"{args.cairn_bin} missing: ninja -C {REPO}/build -j1 cairn")
    return problems


def clean_stale_workdirs(base, out):
    """Removes /tmp/cairn-bench-<pid> folders of benchmark runs that are no longer alive."""
    for path in glob.glob(os.path.join(base, "cairn-bench-*")):
        try:
            pid = int(path.rsplit("-", 1)[1])
            os.kill(pid, 0)
            continue  # That run is still going.
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue
        for m in sorted(procs.mounts_under(path), reverse=True):
            procs.lazy_unmount(m)
        if procs.mounts_under(path):
            out(f"note: stale {path} still has mounts; left alone")
            continue
        shutil.rmtree(path, ignore_errors=True)
        out(f"note: removed stale {path} of a dead run")


class Runner:
    def __init__(self, args, out, ds):
        self.args = args
        self.out = out
        self.ds = ds
        self.epoch_seed = 0
        self.last_order = []

    def order(self, keys):
        """A new shuffled order per epoch (seeded: the same sequence for every system)."""
        self.epoch_seed += 1
        keys = list(keys)
        random.Random(self.epoch_seed).shuffle(keys)
        return keys

    def measure(self, sysobj, label, fn, drop):
        check_stop()
        drop_s = workloads.drop_caches() if drop else None
        m0 = sysobj.metrics()
        c0 = sysobj.cpu_seconds()
        with procs.Watchdog(sysobj.daemon, self.args.measure_timeout,
                            f"{sysobj.name} {label}") as wd:
            try:
                r = fn()
            except Exception as e:
                if wd.fired:
                    raise workloads.WorkloadError(f"{label}: hung; daemon killed ({e})") from e
                raise
        c1 = sysobj.cpu_seconds()
        m1 = sysobj.metrics()
        if sysobj.daemon is not None and not sysobj.daemon.alive():
            raise procs.DaemonError(f"{sysobj.name} died during {label}:\n"
                                    f"{sysobj.daemon.log_tail()}")
        r["dropped_page_cache"] = drop
        r["drop_caches_s"] = drop_s
        r["daemon_cpu_s"] = (c1 - c0) if c0 is not None and c1 is not None else None
        if m0 and m1:
            r["metrics_delta"] = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1
                                  if k.startswith("cairn_") and not k.endswith("_bucket")}
        self.out(f"[{sysobj.name:<6}] {label:<24} {self.describe(r)}")
        return r

    @staticmethod
    def describe(r):
        parts = []
        if "files" in r:
            parts.append(f"{r['files']:>5} files {r['bytes'] / 1e6:9.1f} MB {r['seconds']:7.2f} s "
                         f"{r['MBps']:8.1f} MB/s {r['files_per_s']:8.1f} files/s")
        elif "samples" in r:
            parts.append(f"{r['samples']:>5} samples {r['seconds']:7.2f} s "
                         f"{r['samples_per_s']:8.1f} samples/s {r['MBps']:8.1f} MB/s")
        elif "iops" in r:
            parts.append(f"{r['iops']:9.0f} IOPS p50 {r['clat_p50_us']:.1f} us "
                         f"p99 {r['clat_p99_us']:.1f} us")
        if r.get("daemon_cpu_s") is not None:
            parts.append(f"daemon cpu {r['daemon_cpu_s']:.2f} s")
        md = r.get("metrics_delta")
        if md:
            c = {k: md.get(v, 0) for k, v in CAIRN_COUNTERS.items()}
            parts.append(f"hits {c['hits']:.0f} misses {c['misses']:.0f} ufs {c['ufs_req']:.0f} "
                         f"req {c['ufs_MB'] / 1e6:.1f} MB")
        return " | ".join(parts)

    def epoch_fn(self, sysobj, keys, readers):
        keys = self.order(keys)
        self.last_order = keys
        sizes = [self.ds.size_of(k) for k in keys]
        if sysobj.is_fs:
            paths = [os.path.join(sysobj.root, k) for k in keys]
            return lambda: workloads.file_epoch(paths, sizes, readers)
        return lambda: sysobj.epoch(keys, sizes, readers)

    def phase(self, sysobj, key, keys, readers, res):
        """Fresh cache, one cold epoch, then warm (page cache dropped) and hot epochs; then the
        workloads that need this phase's data cached (DataLoader, fio)."""
        a = self.args
        sysobj.start_fresh()
        w = res["workloads"].setdefault(key, {})
        w["cold"] = self.measure(sysobj, f"{key} cold", self.epoch_fn(sysobj, keys, readers),
                                 drop=True)
        if not sysobj.is_fs:
            return  # Direct GETs have no cache: cold is the only state.
        w["warm"] = []
        warm_orders = []
        for i in range(a.repeats):
            fn = self.epoch_fn(sysobj, keys, readers)
            warm_orders.append(self.last_order)
            w["warm"].append(self.measure(sysobj, f"{key} warm {i + 1}/{a.repeats}", fn,
                                          drop=True))
        w["hot"] = [self.measure(sysobj, f"{key} hot {i + 1}/{a.repeats}",
                                 self.epoch_fn(sysobj, keys, readers), drop=False)
                    for i in range(a.repeats)]
        if key == "small_x8" and "dataloader" in a.workloads:
            self.dataloader(sysobj, res)
        if key == "large_x1" and "fio" in a.workloads:
            # The file the last warm epoch read first: the one least likely to still sit in a
            # system's in-memory buffer (Cairn's client keeps 256 MiB), so fio measures the
            # system's cache proper. Orders are seeded, so every system gets the same file.
            fio_key = warm_orders[-1][0]
            path = os.path.join(sysobj.root, fio_key)
            res["workloads"]["fio"] = self.measure(
                sysobj, f"fio 4k randread {fio_key}",
                lambda: workloads.fio_randread(path, a.fio_runtime), drop=True)
        bad = self.ds.verify(sysobj.root, [k for k in self.ds.sample_keys() if k in keys])
        res.setdefault("verify_errors", []).extend(bad)
        if bad:
            self.out(f"[{sysobj.name:<6}] CONTENT MISMATCH: {'; '.join(bad)}")

    def dataloader(self, sysobj, res):
        paths = [os.path.join(sysobj.root, k) for k in self.ds.small]
        bench = workloads.DataLoaderBench(paths, self.ds.small_size)
        try:
            d = res["workloads"].setdefault("dataloader", {})
            d["prime"] = self.measure(sysobj, "dataloader prime", bench.epoch, drop=False)
            d["warm"] = [self.measure(sysobj, f"dataloader warm {i + 1}/{self.args.repeats}",
                                      bench.epoch, drop=True)
                         for i in range(self.args.repeats)]
        finally:
            bench.close()

    def run_system(self, sysobj):
        a = self.args
        res = {"workloads": {}, "errors": []}
        t0 = time.monotonic()
        plan = [("small_x1", self.ds.small, 1), ("small_x8", self.ds.small, 8),
                ("large_x1", self.ds.large, 1), ("large_x8", self.ds.large, 8)]
        for key, keys, readers in plan:
            needed = (key in a.workloads or (key == "small_x8" and "dataloader" in a.workloads)
                      or (key == "large_x1" and "fio" in a.workloads))
            if not needed or not keys:
                continue
            try:
                self.phase(sysobj, key, keys, readers, res)
            except Exception as e:  # noqa: BLE001 - one system's failure must not end the run.
                check_stop()
                res["errors"].append(f"{key}: {type(e).__name__}: {e}")
                self.out(f"[{sysobj.name:<6}] ERROR in {key}: {type(e).__name__}: {e}")
                tail = sysobj.daemon.log_tail(1500) if sysobj.daemon is not None else ""
                if tail.strip() and not isinstance(e, procs.DaemonError):
                    self.out(f"[{sysobj.name:<6}] log tail:\n{tail}")
        res["command"] = sysobj.describe()
        if sysobj.daemon is not None:
            res["rss_bytes_end"] = sysobj.daemon.rss_bytes()
        sysobj.stop()
        res["wall_s"] = time.monotonic() - t0
        self.out(f"[{sysobj.name:<6}] done in {res['wall_s']:.0f} s")
        return res


def main(argv):
    args = parse_args(argv)
    out = Output()
    command = " ".join(shlex.quote(x) for x in [sys.executable, os.path.abspath(__file__)] + argv)
    problems = check_prerequisites(args)
    if problems:
        for p in problems:
            print("cannot run: " + p, file=sys.stderr)
        return 2
    started = datetime.datetime.now()
    stamp = started.strftime("%Y%m%d-%H%M%S")
    base = os.path.realpath(args.workdir_base)
    clean_stale_workdirs(base, out)
    workdir = os.path.join(base, f"cairn-bench-{os.getpid()}")
    os.makedirs(os.path.join(workdir, "logs"))
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

    cleaned = []

    def cleanup():
        if cleaned:
            return
        cleaned.append(True)
        procs.stop_all()
        for m in sorted(procs.mounts_under(workdir), reverse=True):
            procs.lazy_unmount(m)
        left = procs.mounts_under(workdir)
        if left:
            print(f"WARNING: still mounted, not removing {workdir}: {left}", flush=True)
        elif args.keep_workdir:
            print(f"kept {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    def on_signal(signum, _frame):
        _stop_signal.append(signum)
        raise SystemExit(128 + signum)

    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t_start = time.monotonic()
    try:
        return run(args, out, command, started, stamp, workdir, t_start)
    finally:
        cleanup()


def run(args, out, command, started, stamp, workdir, t_start):
    minfo = machine.info(workdir, REPO, args.cairn_bin)
    out(f"Cairn read benchmark, {started.isoformat(timespec='seconds')}")
    out(f"command: {command}")
    out(machine.info_text(minfo))
    out("NOTE: a shared machine; other jobs may have run at the same time (see load).")
    ds = dataset.Dataset(os.path.join(workdir, "data"), args.small_files, MIB, args.large_files,
                         args.large_mib * MIB)
    out(f"dataset: {len(ds.small)} x 1 MiB + {len(ds.large)} x {args.large_mib} MiB = "
        f"{ds.total_bytes / GIB:.2f} GiB, random bytes; systems {','.join(args.systems)}; "
        f"workloads {','.join(args.workloads)}; repeats {args.repeats}")
    if shutil.disk_usage(workdir).free < ds.total_bytes * 6:
        out("cannot run: not enough free disk for data, s3rver, local copy and three caches")
        return 2
    out(f"generated local copy in {ds.generate():.1f} s")

    s3 = None
    if set(args.systems) & {"cairn", "s3fs", "rclone", "direct"}:
        s3 = start_s3rver(args, workdir)
        uploader = workloads.S3Reader(s3.endpoint, s3.bucket, s3.access_key, s3.secret_key, 8)
        out(f"s3rver at {s3.endpoint}, bucket {s3.bucket}; uploaded in "
            f"{ds.upload(uploader):.1f} s")

    cache_size = f"{max(1, math.ceil(ds.total_bytes * 1.25 / GIB))}GiB"
    makers = {
        "local": lambda: systems.LocalSystem(workdir, ds.root),
        "direct": lambda: systems.DirectSystem(workdir, s3, args.direct_client, 8),
        "cairn": lambda: systems.CairnSystem(workdir, s3, args.cairn_bin, cache_size,
                                             args.cairn_arg),
        "s3fs": lambda: systems.S3fsSystem(workdir, s3),
        "rclone": lambda: systems.RcloneSystem(workdir, s3),
    }
    runner = Runner(args, out, ds)
    results = {}
    for name in RUN_ORDER:
        if name in args.systems:
            out(f"--- {name}")
            runner.epoch_seed = 0  # Same file orders for every system.
            results[name] = runner.run_system(makers[name]())

    out("")
    out("=" * 100)
    out(f"RESULTS ({len(ds.small)} x 1 MiB, {len(ds.large)} x {args.large_mib} MiB)")
    out(report.table(results, args.repeats))
    out("")
    ratio_text, ratio_data = report.ratios(results)
    out(ratio_text)
    out("")
    out(report.cost_text(results))
    out("")
    tlist = report.targets(results)
    out("TARGETS")
    out(report.targets_text(tlist))
    errors = {s: r["errors"] + r.get("verify_errors", []) for s, r in results.items()
              if r["errors"] or r.get("verify_errors")}
    out("")
    out("commands:")
    for s, r in results.items():
        cmd = r.get("command")
        if isinstance(cmd, list):
            cmd = " ".join(shlex.quote(str(x)) for x in cmd)
        out(f"  {s:<7} {cmd or '-'}")
    out("  fio     " + " ".join(workloads.fio_command("<root>/<large file>", args.fio_runtime)))
    out("          (<large file>: the one the last warm epoch read first, the same for every "
        "system)")
    for s, errs in errors.items():
        out(f"ERRORS {s}: " + "; ".join(errs))
    if args.quick:
        out("NOTE: --quick dataset; targets are defined for the full dataset.")
    minfo["loadavg_end"] = machine.loadavg()
    wall = time.monotonic() - t_start
    out(f"load at end: {' '.join(minfo['loadavg_end'])}; wall time {wall:.0f} s")

    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, f"{stamp}.json")
    doc = {"started": started.isoformat(timespec="seconds"), "command": command,
           "wall_s": wall, "machine": minfo,
           "config": {k: v for k, v in vars(args).items()},
           "dataset": {"small_files": len(ds.small), "small_bytes": ds.small_size,
                       "large_files": len(ds.large), "large_bytes": ds.large_size,
                       "bucket": BUCKET, "cairn_cache_size": cache_size},
           "fio_command": workloads.fio_command("FILE", args.fio_runtime),
           "results": results, "summary": report.summary(results), "ratios": ratio_data,
           "targets": tlist}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(path[:-5] + ".txt", "w") as f:
        f.write("\n".join(out.lines) + "\n")
    out(f"saved {path} (+ .txt)")
    return 1 if errors else 0


def start_s3rver(args, workdir):
    port = procs.free_port()
    data = os.path.join(workdir, "s3rver")
    os.makedirs(data)
    env = dict(os.environ)
    env["NODE_OPTIONS"] = "--openssl-legacy-provider"  # Node 20: paginated listings fail without.
    argv = ["node", args.s3rver_js, "-d", data, "-a", "127.0.0.1", "-p", str(port), "--silent",
            "--no-vhost-buckets", "--configure-bucket", BUCKET]
    d = procs.Daemon("s3rver", argv, os.path.join(workdir, "logs", "s3rver.log"), env=env).start()
    d.wait_ready(lambda: procs.http_get(f"http://127.0.0.1:{port}/{BUCKET}")[0] == 200, 30,
                 "serving the bucket")
    return systems.S3Env(f"http://127.0.0.1:{port}", BUCKET)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
