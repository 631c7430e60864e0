#!/usr/bin/python3
"""What TLS costs on the page protocol: warm reads through `cairn fuse` from one `cairn worker`
over TCP (no short-circuit), plaintext against mutual TLS 1.3, on this machine.

Two workers serve the same folder, one plaintext and one with a node certificate (both on
127.0.0.1, each with its own cache), and one `cairn fuse` client runs for each. A first pass
through each client warms its worker and fills the client's page buffer; the dataset (default
512 MiB) is twice the client's buffer (256 MiB), so in the measured passes every page comes from
the worker again, into recycled client memory (first-touch page faults cost ~5 ms per MiB on
the 2-core VM of docs/benchmarks.md and would otherwise dominate). Each pass reads every file
whole with --readers threads, O_DIRECT 1 MiB reads; plaintext and TLS passes alternate.
Reported: median MB/s of each, the TLS / plaintext ratio, the worker's and the client's CPU
milliseconds per MB read (from /proc/PID/stat), and a fresh client's time to its first byte
(connect + TLS handshake + Hello). Then the latency of single page reads, 4 KiB and 1 MiB, one at
a time from a client with no FUSE and no page buffer (`build/bench/page_latency`, one process
per run; every read a cache hit on the worker): p50, p99 and MB/s of each, TLS against
plaintext.

A benchmark, not a test: it fails (exit 1) only if a read returns wrong bytes or a process
misbehaves. Run with Debian's interpreter:

    /usr/bin/python3 bench/tls_bench.py [--size-mib 256] [--runs 5] [--out FILE.json]

docs/benchmarks.md ("TLS on the page protocol") has a recorded run.
"""
import argparse
import hashlib
import json
import mmap
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import Harness  # noqa: E402

MIB = 1 << 20
MOUNT = "/bench"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn-bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--size-mib", type=int, default=512)
    p.add_argument("--file-mib", type=int, default=16)
    p.add_argument("--readers", type=int, default=4)
    p.add_argument("--runs", type=int, default=5, help="measured runs per mode (median)")
    p.add_argument("--latency-runs", type=int, default=3,
                   help="runs of page_latency per mode and read size (median)")
    p.add_argument("--page-latency-bin",
                   default=os.path.join(REPO, "build", "bench", "page_latency"))
    p.add_argument("--out", default=None, help="JSON file for every raw value")
    return p.parse_args(argv)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


class Bench:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.src = os.path.join(workdir, "src")
        self.pki = os.path.join(workdir, "pki")
        self.files, self.sha = {}, {}
        self.harness = Harness(os.path.abspath(args.cairn_bin), os.path.join(workdir, "h"))

    def run_cairn(self, *args):
        r = self.harness.run(list(args))
        if r.returncode != 0:
            raise RuntimeError(f"cairn {args}: {r.stderr.decode(errors='replace')}")

    def setup(self):
        os.makedirs(self.src)
        for i in range(self.args.size_mib // self.args.file_mib):
            data = os.urandom(self.args.file_mib * MIB)
            name = f"f{i:03d}.bin"
            with open(os.path.join(self.src, name), "wb") as f:
                f.write(data)
            self.files[name] = len(data)
            self.sha[name] = hashlib.sha256(data).hexdigest()
        os.makedirs(self.pki)
        self.run_cairn("cert", "ca", "--out", self.pki)
        self.run_cairn("cert", "issue", "worker", "--ca", self.pki, "--host", "127.0.0.1",
                       "--out", self.pki)
        self.run_cairn("cert", "issue", "bench", "--client", "--ca", self.pki, "--out", self.pki)
        cache = f"{self.args.size_mib * 2 + 64}MiB"
        mount = [f"{MOUNT}=file://{self.src}"]
        self.workers = {
            "plain": self.harness.worker(mount, os.path.join(self.workdir, "cache-plain"),
                                         cache_size=cache, name="w-plain"),
            "tls": self.harness.worker(mount, os.path.join(self.workdir, "cache-tls"),
                                       cache_size=cache, name="w-tls",
                                       extra=self.tls_flags("worker")),
        }

    def tls_flags(self, name):
        return ["--tls-ca", os.path.join(self.pki, "ca.crt"),
                "--tls-cert", os.path.join(self.pki, f"{name}.crt"),
                "--tls-key", os.path.join(self.pki, f"{name}.key")]

    def fuse(self, mode):
        w = self.workers[mode]
        flags = ["--no-short-circuit"] + (self.tls_flags("bench") if mode == "tls" else [])
        return self.harness.fuse([f"{MOUNT}=file://{self.src}"],
                                 workers=[f"127.0.0.1:{w.listen_port}"], extra=flags,
                                 name=f"fuse-{mode}")

    def read_all(self, fuse, verify=False):
        q = queue.Queue()
        for n in sorted(self.files):
            q.put(n)
        done, errors, first = [0], [], []
        lock = threading.Lock()

        def reader():
            buf = mmap.mmap(-1, MIB)
            while True:
                try:
                    name = q.get_nowait()
                except queue.Empty:
                    return
                h = hashlib.sha256() if verify else None
                try:
                    fd = os.open(os.path.join(fuse.mountpoint, MOUNT.lstrip("/"), name),
                                 os.O_RDONLY | os.O_DIRECT)
                    off = 0
                    try:
                        while True:
                            n = os.preadv(fd, [buf], off)
                            if n == 0:
                                break
                            if not first:
                                with lock:
                                    first.append(time.monotonic())
                            if h:
                                h.update(buf[:n])
                            off += n
                    finally:
                        os.close(fd)
                    if off != self.files[name] or (h and h.hexdigest() != self.sha[name]):
                        raise IOError(f"{name}: wrong bytes through the mount")
                    with lock:
                        done[0] += off
                except Exception as e:
                    with lock:
                        errors.append(repr(e))
                    return

        threads = [threading.Thread(target=reader) for _ in range(self.args.readers)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        if errors:
            raise RuntimeError(f"read errors: {errors[:3]}")
        return took, done[0], (first[0] - t0) if first else None

    def run(self):
        clients, first_byte = {}, {}
        for mode in ("plain", "tls"):  # Warm the workers and the clients, checking every byte.
            clients[mode] = self.fuse(mode)
            first_byte[mode] = self.read_all(clients[mode], verify=True)[2] * 1000
        raw = {"plain": [], "tls": []}
        for i in range(self.args.runs):
            for mode in (("plain", "tls") if i % 2 == 0 else ("tls", "plain")):
                f, w = clients[mode], self.workers[mode]
                wcpu0, ccpu0 = cpu_seconds(w.pid), cpu_seconds(f.pid)
                took, nbytes, _ = self.read_all(f)
                wcpu, ccpu = cpu_seconds(w.pid) - wcpu0, cpu_seconds(f.pid) - ccpu0
                mb = nbytes / 1e6
                raw[mode].append({"seconds": took, "mb_per_s": mb / took,
                                  "worker_cpu_ms_per_mb": wcpu * 1000 / mb,
                                  "client_cpu_ms_per_mb": ccpu * 1000 / mb})
                print(f"run {i + 1} {mode:5s} {mb / took:8.0f} MB/s  worker "
                      f"{wcpu * 1000 / mb:5.2f} ms/MB  client {ccpu * 1000 / mb:5.2f} ms/MB",
                      flush=True)
        for f in clients.values():
            f.stop()
        latency = self.latency()
        med = {m: {k: statistics.median(r[k] for r in raw[m])
                   for k in ("mb_per_s", "worker_cpu_ms_per_mb", "client_cpu_ms_per_mb")}
               for m in raw}
        for m in med:
            med[m]["first_byte_ms"] = first_byte[m]
        print()
        print(f"{'':22s}{'plaintext':>12s}{'TLS':>12s}{'TLS/plain':>12s}")
        for k, label in (("mb_per_s", "warm MB/s"), ("worker_cpu_ms_per_mb", "worker CPU ms/MB"),
                         ("client_cpu_ms_per_mb", "client CPU ms/MB"),
                         ("first_byte_ms", "first byte ms (1 run)")):
            a, b = med["plain"][k], med["tls"][k]
            # CPU times come in clock ticks: a short run can measure 0 for one side.
            ratio = f"{b / a:11.2f}x" if a > 0 else f"{'-':>12s}"
            print(f"{label:22s}{a:12.2f}{b:12.2f}{ratio}")
        for length, per_mode in latency.items():
            for k in ("p50_us", "p99_us", "mb_per_s"):
                a = statistics.median(r[k] for r in per_mode["plain"])
                b = statistics.median(r[k] for r in per_mode["tls"])
                label = f"{length // 1024} KiB {k}"
                print(f"{label:22s}{a:12.1f}{b:12.1f}{b / a:11.2f}x  (TLS - plain: {b - a:+.1f})")
        return {"args": vars(self.args), "raw": raw, "median": med, "latency": latency}

    def latency(self):
        """Round trips of single page reads (page_latency: no FUSE, no client buffer), 4 KiB
        and 1 MiB, plaintext and TLS alternating; each a cache hit on the worker."""
        binary = self.args.page_latency_bin
        if not os.path.exists(binary):
            print(f"(no {binary}: build target page_latency for the latency table)")
            return {}
        name = sorted(self.files)[0]
        st = os.stat(os.path.join(self.src, name))
        out = {}
        for length, reads in ((4096, 3000), (MIB, 300)):
            out[length] = {"plain": [], "tls": []}
            for i in range(self.args.latency_runs):
                for mode in (("plain", "tls") if i % 2 == 0 else ("tls", "plain")):
                    w = self.workers[mode]
                    args = [binary, "--address", f"127.0.0.1:{w.listen_port}", "--mount", MOUNT,
                            "--key", name, "--version", f"{st.st_size}-{st.st_mtime_ns}",
                            "--object-size", str(st.st_size), "--length", str(length),
                            "--reads", str(reads)]
                    if mode == "tls":
                        args += self.tls_flags("bench")
                    r = subprocess.run(args, capture_output=True, timeout=300)
                    if r.returncode != 0:
                        raise RuntimeError(f"page_latency ({mode}): {r.stderr.decode()}")
                    fields = r.stdout.decode().split()
                    values = {fields[j]: float(fields[j + 1]) for j in range(0, len(fields), 2)}
                    out[length][mode].append(values)
                    print(f"latency {length:>8d} B {mode:5s} p50 {values['p50_us']:7.1f} us  "
                          f"p99 {values['p99_us']:7.1f} us", flush=True)
        return out


def main(argv):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cairn-tls-bench-") as d:
        b = Bench(args, d)
        try:
            b.setup()
            result = b.run()
        finally:
            errors = b.harness.cleanup()
            if errors:
                print(f"cleanup problems: {errors}", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
