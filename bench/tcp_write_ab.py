#!/usr/bin/python3
"""A/B of the write path over TCP: `cairn put` of one local file through a `cairn worker` (its
WritePage requests over the worker protocol, not the in-process channel of `cairn up`) into a
write-through folder mount, for two builds of cairn, run after run alternating, same machine.
Each run times the put from start to exit (the file is then in the folder), on a fresh worker
cache, and checks the written file's size and SHA-256.

    /usr/bin/python3 bench/tcp_write_ab.py --a OLD/cairn --b NEW/cairn [--size-mib 1024]
                                           [--runs 5] [--out FILE.json]

Prints one JSON line per run and a summary (medians, b/a ratio). docs/benchmarks.md has a
recorded run.
"""
import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("worker did not listen")


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def one_run(binary, work, source, size, want_sha, run):
    lake = os.path.join(work, f"lake-{run}")
    cache = os.path.join(work, f"cache-{run}")
    os.makedirs(lake)
    config = os.path.join(work, f"config-{run}.json")
    with open(config, "w") as f:
        json.dump({"mounts": [{"path": "/out", "uri": "file://" + lake,
                               "write_mode": "through"}]}, f)
    port = free_port()
    log = open(os.path.join(work, f"worker-{run}.log"), "wb")
    worker = subprocess.Popen(
        [binary, "worker", "--cache-dir", cache, "--cache-size", "4GiB", "--listen",
         f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{free_port()}", "--id", "w",
         "--config", config], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, worker)
        start = time.monotonic()
        put = subprocess.run([binary, "put", source, "/out/ckpt.bin", "--config", config,
                              "--worker", f"127.0.0.1:{port}"], capture_output=True, timeout=600)
        elapsed = time.monotonic() - start
        if put.returncode != 0:
            raise RuntimeError("put failed: " + put.stderr.decode(errors="replace"))
        written = os.path.join(lake, "ckpt.bin")
        if os.path.getsize(written) != size or sha256_of(written) != want_sha:
            raise RuntimeError(f"{written} differs from the source")
        return elapsed
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        shutil.rmtree(lake, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the baseline cairn binary")
    parser.add_argument("--b", required=True, help="the cairn binary compared with it")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    size = args.size_mib << 20
    work = tempfile.mkdtemp(prefix="tcp-write-ab-")
    try:
        source = os.path.join(work, "source.bin")
        with open(source, "wb") as f:
            block = os.urandom(1 << 20)
            for i in range(args.size_mib):
                f.write(i.to_bytes(8, "little") + block[8:])
        want_sha = sha256_of(source)
        times = {"a": [], "b": []}
        results = []
        for run in range(args.runs):
            for label in ("a", "b") if run % 2 == 0 else ("b", "a"):
                binary = getattr(args, label)
                elapsed = one_run(binary, work, source, size, want_sha, f"{run}{label}")
                times[label].append(elapsed)
                line = {"run": run, "build": label, "seconds": round(elapsed, 3),
                        "mb_per_s": round(size / elapsed / 1e6, 1)}
                results.append(line)
                print(json.dumps(line), flush=True)
        summary = {label: {"median_s": round(statistics.median(t), 3),
                           "median_mb_per_s": round(size / statistics.median(t) / 1e6, 1)}
                   for label, t in times.items()}
        summary["b_over_a_time"] = round(
            statistics.median(times["b"]) / statistics.median(times["a"]), 3)
        print(json.dumps({"summary": summary, "size_mib": args.size_mib, "runs": args.runs}))
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"runs": results, "summary": summary, "a": args.a, "b": args.b,
                           "size_mib": args.size_mib}, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
