"""Helpers for Cairn's cluster-mode tests and benchmark: a private etcd and a small cluster.

`Etcd` runs /usr/bin/etcd (3.4) as a child process on free loopback client and peer ports with
its data under a given folder, and can stop, SIGKILL and restart it on the SAME ports and data
folder (so workers and clients configured with its URL find it again). `Cluster` starts cluster
workers and FUSE clients through conftest's `Harness` and reads cluster state with
`cairn status --json` or, where only etcd's own view matters, with a v3 range request.

Used by tests/test_cluster.py (which owns the `etcd` fixture) and bench/cluster_bench.py. Every
process is a conftest `Proc` (own process group, output in a log file, stopped by PID).
"""

import base64
import json
import os
import signal
import socket
import ssl
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import Proc, free_port, http_get, parse_metrics, wait_until

ETCD_BIN = "/usr/bin/etcd"
# Metrics of a worker process (Prometheus, /metrics on --metrics-listen).
REQUESTS = "cairn_worker_requests_total"
HITS = "cairn_worker_cache_hits_total"
MISSES = "cairn_worker_cache_misses_total"
UFS_BYTES = "cairn_worker_bytes_from_ufs_total"
COALESCED = "cairn_worker_coalesced_misses_total"
READ_AHEAD = "cairn_worker_read_ahead_pages_total"
PAGES = "cairn_cache_pages"
ETCD_CONNECTED = "cairn_etcd_connected"
# Metrics of a `cairn fuse --metrics-listen` client.
CLIENT_PAGE_READS = "cairn_client_page_reads_total"
CLIENT_FAILOVERS = "cairn_client_page_read_failures_total"
CLIENT_FALLBACK_BYTES = "cairn_client_fallback_bytes_total"
CLIENT_WORKERS = "cairn_client_workers"
CLIENT_MOUNT_UPDATES = "cairn_client_mount_table_updates_total"
REGISTERED = "cairn_worker_registered"
RING_WORKERS = "cairn_worker_ring_workers"
WORKERS_PREFIX = "/cairn/v1/workers/"  # docs/etcd-layout.md
# Markers of a crash or an unhandled exception in a command's output.
CRASH_MARKERS = ("Traceback", "terminate called", "Segmentation fault", "Aborted",
                 "core dumped", "AddressSanitizer", "panic:", "std::", "what():")


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class Etcd:
    """One single-member etcd on 127.0.0.1. Not thread-safe: drive it from one thread."""

    def __init__(self, workdir, name="etcd", tls=None):
        """`tls`: {"ca", "cert", "key", "client_cert", "client_key"} file paths: etcd then
        serves https and requires client certificates signed by `ca`; this helper uses
        `client_cert` to talk to it."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.name = name
        self.client_port, self.peer_port = free_port(), free_port()  # Never the same one.
        self.tls = tls
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.client_port}"
        self.ssl_context = None
        if tls:
            self.ssl_context = ssl.create_default_context(cafile=str(tls["ca"]))
            self.ssl_context.load_cert_chain(str(tls["client_cert"]), str(tls["client_key"]))
        self.proc = None
        self.starts = 0

    def _args(self):
        peer = f"http://127.0.0.1:{self.peer_port}"
        # The flags of src/membership/etcd_process.cc. Short heartbeat and election timeouts:
        # a single member elects itself at once on start and on restart.
        return [ETCD_BIN, "--name", "default", "--data-dir", self.data_dir,
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"default={peer}",
                "--heartbeat-interval", "10", "--election-timeout", "100",
                *(["--cert-file", self.tls["cert"], "--key-file", self.tls["key"],
                   "--trusted-ca-file", self.tls["ca"], "--client-cert-auth"]
                  if self.tls else [])]

    def start(self, timeout=20.0):
        """Starts etcd (again, on the same ports and data folder) and waits until healthy."""
        assert not self.alive(), "etcd is already running"
        if not os.access(ETCD_BIN, os.X_OK):
            raise RuntimeError(f"{ETCD_BIN} is missing: install the etcd-server package "
                               "(scripts/install-deps.sh)")
        # A killed etcd's ports are free at once (it holds no accepted connection in TIME_WAIT
        # that blocks a listener with SO_REUSEADDR, which etcd sets); wait a little anyway.
        deadline = time.monotonic() + 10
        while not (_port_free(self.client_port) and _port_free(self.peer_port)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd ports {self.client_port}/{self.peer_port} stay busy")
            time.sleep(0.05)
        self.starts += 1
        self.proc = Proc(f"{self.name}-{self.starts}", self._args(), self.workdir)
        self.wait_healthy(timeout)
        return self

    def healthy(self):
        try:
            if self.tls:
                with urllib.request.urlopen(self.url + "/health", timeout=1.0,
                                            context=self.ssl_context) as resp:
                    status, body = resp.status, resp.read().decode()
            else:
                status, body = http_get(self.client_port, "/health", timeout=1.0)
        except OSError:
            return False
        # 3.4 answers {"health":"true"} once the member has a leader (itself).
        return status == 200 and '"true"' in body

    def wait_healthy(self, timeout=20.0):
        def ready():
            if not self.alive():
                raise AssertionError(f"etcd exited during start-up:\n{self.log_tail()}")
            return self.healthy()
        wait_until(ready, timeout, f"etcd on port {self.client_port} to be healthy",
                   interval=0.05)

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def kill(self):
        """SIGKILL, as a crash or a lost machine would; returns when it is reaped."""
        if self.proc is not None:
            self.proc.kill9()

    def stop(self):
        """SIGTERM (etcd shuts down cleanly), SIGKILL of its group if that takes too long."""
        if self.proc is not None:
            self.proc.stop()

    def restart(self, timeout=20.0):
        """Kills etcd if it runs, then starts it on the same ports and data folder."""
        if self.alive():
            self.kill()
        return self.start(timeout)

    def log_tail(self, lines=40):
        return self.proc.log_tail(lines) if self.proc is not None else "<not started>"

    # -- v3 JSON gateway (keys and values are base64; docs/etcd-layout.md) ------------------
    def _post(self, path, body, timeout=3.0):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context) as resp:
            return json.loads(resp.read().decode())

    def get_prefix(self, prefix):
        """{key: value} of every key under `prefix`, as etcd has them now."""
        raw = prefix.encode()
        end = raw[:-1] + bytes([raw[-1] + 1])
        out = self._post("/v3/kv/range", {"key": base64.b64encode(raw).decode(),
                                          "range_end": base64.b64encode(end).decode()})
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
                for kv in out.get("kvs", [])}

    def put(self, key, value):
        """Writes `key` as anyone with etcd access could (tests of hand-written documents)."""
        self._post("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                                  "value": base64.b64encode(value.encode()).decode()})

    def worker_ids(self):
        """Ids of the workers registered in etcd (keys under /cairn/v1/workers/)."""
        return sorted(k[len(WORKERS_PREFIX):] for k in self.get_prefix(WORKERS_PREFIX))


def metrics_of(port, timeout=2.0, tls=None):
    status, body = http_get(port, "/metrics", timeout=timeout, tls=tls)
    assert status == 200, f"/metrics on port {port} answered {status}"
    return parse_metrics(body)


def save_then_rename(folder, name, data):
    """The checkpoint idiom: writes `data` to `folder/name.tmp`, then renames it to
    `folder/name` (os.replace: the rename's error is raised)."""
    temporary = os.path.join(folder, name + ".tmp")
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, os.path.join(folder, name))


def one_error_line(stderr):
    """The single 'cairn: error: ...' line of a failed command's stderr; AssertionError if the
    output is not exactly that one line or shows a crash."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    for marker in CRASH_MARKERS:
        assert marker not in text, f"crash marker {marker!r} in stderr: {text!r}"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one error line on stderr, got {len(lines)}: {text!r}"
    assert lines[0].startswith("cairn: error: "), f"not a cairn error line: {lines[0]!r}"
    return lines[0]


class Cluster:
    """Cluster-mode cairn processes around one etcd, started through a conftest Harness.

    Workers are kept by id in `self.workers` (the latest process of that id); their ports and
    cache folder are remembered so that `restart_worker` brings the same worker back."""

    def __init__(self, harness, etcd, lease_ttl=2, cache_size="256MiB"):
        self.h = harness
        self.etcd = etcd
        self.lease_ttl = lease_ttl
        self.cache_size = cache_size
        self.workers = {}

    @property
    def url(self):
        return self.etcd.url

    def etcd_flags(self):
        return ["--etcd", self.etcd.url]

    # -- workers --------------------------------------------------------------------------
    def start_worker(self, wid, cache_dir=None, listen_port=None, metrics_port=None, extra=(),
                     wait_registered=True):
        """Starts `cairn worker --etcd ... --id wid`; waits for its ports and /healthz and,
        by default, for its key in etcd."""
        cache_dir = cache_dir or str(self.h.workdir / f"cache-{wid}")
        p = self.h.worker([], cache_dir, cache_size=self.cache_size, listen_port=listen_port,
                          metrics_port=metrics_port, name=wid,
                          extra=["--etcd", self.etcd.url, "--lease-ttl", str(self.lease_ttl),
                                 *extra])
        p.wid = wid
        self.workers[wid] = p
        if wait_registered:
            self.wait_registered([wid])
        return p

    def restart_worker(self, wid, wait_registered=True):
        """Starts worker `wid` again with the same id, ports and cache folder."""
        old = self.workers[wid]
        assert not old.alive(), f"{wid} still runs"
        return self.start_worker(wid, cache_dir=old.cache_dir, listen_port=old.listen_port,
                                 metrics_port=old.metrics_port, wait_registered=wait_registered)

    def wait_registered(self, ids, timeout=10.0):
        ids = set(ids)
        wait_until(lambda: ids <= set(self.etcd.worker_ids()), timeout,
                   f"workers {sorted(ids)} in etcd", interval=0.05)

    def wait_ring_settled(self, timeout=10.0):
        """Waits until every live worker's own view of the ring lists all live workers: a
        worker decides a page's replicas (whom it asks, whom it copies to) from that view, and
        one that has not seen the newest worker yet would disagree with the clients."""
        live = [w for w, p in self.workers.items() if p.alive()]
        wait_until(lambda: all(self.metric(w, RING_WORKERS) == len(live) for w in live),
                   timeout, f"each of {live} to see {len(live)} workers in its ring",
                   interval=0.05)

    def wait_unregistered(self, wid, timeout):
        wait_until(lambda: wid not in self.etcd.worker_ids(), timeout,
                   f"worker {wid} to leave etcd", interval=0.05)

    def metric(self, wid, name):
        p = self.workers[wid]
        return metrics_of(p.metrics_port, tls=p.metrics_tls).get(name, 0.0)

    def metric_sum(self, name, ids=None):
        ids = ids if ids is not None else [w for w, p in self.workers.items() if p.alive()]
        return sum(self.metric(w, name) for w in ids)

    # -- clients and commands -------------------------------------------------------------
    def fuse(self, extra=(), mountpoint=None, name="fuse", metrics=False, env=None):
        """Starts `cairn fuse MOUNTPOINT --etcd URL`; with `metrics`, also the client's
        /metrics (Proc.metrics_port)."""
        port = free_port() if metrics else None
        flags = ["--metrics-listen", f"127.0.0.1:{port}"] if metrics else []
        p = self.h.fuse([], mountpoint=mountpoint, name=name,
                        extra=["--etcd", self.etcd.url, *flags, *extra], env=env)
        if metrics:
            p.metrics_port = port
            self.h.wait_healthy(p)
        return p

    def cli(self, args, timeout=30, env=None):
        """Runs `cairn ARGS --etcd URL` (CompletedProcess, output captured)."""
        return self.h.run([*args, "--etcd", self.etcd.url], timeout=timeout, env=env)

    def mount_add(self, path, uri, *flags):
        r = self.cli(["mount", "add", path, uri, *flags])
        assert r.returncode == 0, (f"cairn mount add {path} {uri} {flags} exited "
                                   f"{r.returncode}: {r.stderr.decode(errors='replace')}")
        return r

    def mount_rm(self, path):
        r = self.cli(["mount", "rm", path])
        assert r.returncode == 0, (f"cairn mount rm {path} exited {r.returncode}: "
                                   f"{r.stderr.decode(errors='replace')}")
        return r

    def status(self):
        """Parsed `cairn status --json`."""
        r = self.cli(["status", "--json"], timeout=20)
        assert r.returncode == 0, (f"cairn status --json exited {r.returncode}: "
                                   f"{r.stderr.decode(errors='replace')}")
        return json.loads(r.stdout)

    def status_ids(self):
        return sorted(w["id"] for w in self.status()["workers"])


def send_signal(proc, sig):
    """Signals a conftest Proc by PID if it still runs."""
    if proc.alive():
        os.kill(proc.pid, sig)


def sigstop(proc):
    send_signal(proc, signal.SIGSTOP)


def sigcont(proc):
    send_signal(proc, signal.SIGCONT)


@pytest.fixture
def etcd(tmp_path):
    """A fresh single-member etcd per test. Request it before `harness` (pytest tears fixtures
    down in reverse order), so it stops after the test's cairn processes. Test modules import
    it: `from cluster_util import etcd`."""
    e = Etcd(tmp_path / "etcd")
    e.start()
    yield e
    e.stop()
