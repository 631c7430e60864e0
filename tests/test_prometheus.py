"""A real Prometheus server (Debian's /usr/bin/prometheus) scraping three `cairn worker`s.

What a monitoring setup sees must be what the workers count: every target up and scraped
without error, the per-mount series summed by Prometheus equal to the sums of the workers' own
/metrics (after at most a scrape interval or two of lag), and the egress after a cold read equal
to the dataset's size. A second mount whose path needs escaping in a label value (quote,
backslash, space, non-ASCII) checks the exposition format where a hand-written exporter most
often breaks. Prometheus also scrapes itself, so its own counters of rejected samples can be
asserted to be 0.

Readers use `cairn fuse --no-short-circuit`, so every page read reaches a worker.
"""

import json
import os
import random
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request

import pytest

from cluster_util import etcd, Cluster, metrics_of
from conftest import KiB, MiB, free_port, http_get, read_whole, wait_until

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
MOUNT = "/lake"
ODD = '/odd "q" \\ ü'    # a mount path every label-value escape is needed for
SCRAPE_S = 1
LAG_TIMEOUT = 15.0          # scrape interval + ingestion, generous on a shared 2-core machine

HITS = "cairn_mount_cache_hits_total"
REQS = "cairn_mount_requests_total"
UFS = "cairn_mount_bytes_from_ufs_total"
FROM_CACHE = "cairn_mount_bytes_from_cache_total"
CACHED = "cairn_mount_cached_bytes"


def _pages(size):
    return (size + MiB - 1) // MiB


def _label(value):
    """A label value as the text exposition format writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def per_mount(name, mount):
    return f'{name}{{mount="{_label(mount)}"}}'


def _promql_str(value):
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ------------------------------------------------------------------------------------------
# Prometheus
# ------------------------------------------------------------------------------------------

class Prometheus:
    def __init__(self, harness, targets):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        root = harness.new_dir("prometheus")
        config = os.path.join(root, "prometheus.yml")
        quoted = ", ".join(f'"{t}"' for t in targets)
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: {SCRAPE_S}s
  scrape_timeout: {SCRAPE_S}s
  evaluation_interval: {SCRAPE_S}s
scrape_configs:
  - job_name: cairn
    static_configs:
      - targets: [{quoted}]
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:{self.port}"]
""")
        r = subprocess.run([PROMTOOL, "check", "config", config], capture_output=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        self.proc = harness.spawn("prometheus", [
            PROMETHEUS, f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(root, 'data')}",
            f"--web.listen-address=127.0.0.1:{self.port}"])

    def wait_ready(self, timeout=30.0):
        def ready():
            if not self.proc.alive():
                raise AssertionError(f"prometheus exited: {self.proc.log_tail()}")
            try:
                return http_get(self.port, "/-/ready", timeout=1.0)[0] == 200
            except OSError:
                return False
        wait_until(ready, timeout, "prometheus /-/ready", interval=0.1)

    def api(self, path, **params):
        url = f"{self.base}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.loads(resp.read().decode())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr):
        """Instant vector result: [(labels, float value)]."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return [(x["metric"], float(x["value"][1])) for x in data["result"]]

    def scalar(self, expr):
        """The single value of `expr`, or None while it has no sample."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return result[0][1] if result else None

    def targets(self, job):
        return [t for t in self.api("targets", state="active")["activeTargets"]
                if t["labels"]["job"] == job]




@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """~12 MiB over 9 files, page boundaries included; and a small second tree."""
    rng = random.Random(77)
    sizes = {"a.bin": 3 * MiB, "b.bin": 2 * MiB + 1, "c.bin": MiB - 1, "d.bin": 1,
             "sub/e.bin": 4 * MiB + 4097, "sub/f.bin": 300 * KiB}
    for i in range(3):
        sizes[f"sub/s{i}.bin"] = 200 * KiB + i
    root = tmp_path_factory.mktemp("prom-lake")
    files = {}
    for tree, names in (("lake", sizes), ("odd", {"x.bin": 2 * MiB, "y.bin": 5})):
        for name, size in names.items():
            data = rng.randbytes(size)
            p = root / tree / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            files[(tree, name)] = data
    return root, files


def test_prometheus_scrapes_workers(etcd, harness, lake):
    if not (os.access(PROMETHEUS, os.X_OK) and shutil.which(PROMTOOL)):
        pytest.fail(f"{PROMETHEUS} / {PROMTOOL} missing: install Debian's prometheus package")
    root, files = lake
    cluster = Cluster(harness, etcd, lease_ttl=2, cache_size="64MiB")
    workers = [cluster.start_worker(f"w{i}") for i in (1, 2, 3)]
    cluster.mount_add(MOUNT, "file://" + str(root / "lake"))
    cluster.mount_add(ODD, "file://" + str(root / "odd"))
    wait_until(lambda: all(per_mount(CACHED, ODD) in metrics_of(w.metrics_port)
                           for w in workers), 10, "workers to serve both mounts", interval=0.05)

    # The exposition passes Prometheus's own linter on every worker.
    for w in workers:
        _, body = http_get(w.metrics_port, "/metrics")
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body.encode(),
                           capture_output=True, timeout=30)
        assert r.returncode == 0, f"{w.wid}: promtool: {r.stdout!r} {r.stderr!r}"

    addr = {f"127.0.0.1:{w.metrics_port}": w for w in workers}
    prom = Prometheus(harness, sorted(addr))
    prom.wait_ready()

    def all_up():
        ts = prom.targets("cairn")
        return len(ts) == 3 and all(t["health"] == "up" for t in ts)
    wait_until(all_up, LAG_TIMEOUT, "3 healthy cairn targets", interval=0.2)
    up = {x[0]["instance"]: x[1] for x in prom.query('up{job="cairn"}')}
    assert up == {a: 1.0 for a in addr}, up

    # A cold read of everything, then a fresh client reading it all again: hits.
    tree = {n: d for (t, n), d in files.items() if t == "lake"}
    odd = {n: d for (t, n), d in files.items() if t == "odd"}
    for name in ("cold", "warm"):
        fuse = cluster.fuse(extra=["--no-short-circuit"], name=f"fuse-{name}")
        for mount, data in ((MOUNT, tree), (ODD, odd)):
            for rel, want in data.items():
                path = os.path.join(fuse.mountpoint, mount.lstrip("/"), rel)
                assert read_whole(path, direct=True) == want, (name, mount, rel)
        assert fuse.stop() == 0
        if name == "cold":
            egress = sum(metrics_of(w.metrics_port).get(per_mount(UFS, MOUNT), 0)
                         for w in workers)
            assert egress == sum(len(d) for d in tree.values()), egress

    own = {a: metrics_of(w.metrics_port) for a, w in addr.items()}

    def own_sum(name, mount):
        return sum(m.get(per_mount(name, mount), 0) for m in own.values())
    assert own_sum(HITS, MOUNT) >= sum(_pages(len(d)) for d in tree.values() if d)
    assert own_sum(UFS, MOUNT) == sum(len(d) for d in tree.values())
    assert own_sum(UFS, ODD) == sum(len(d) for d in odd.values())

    # Prometheus catches up with the workers' own numbers within the scrape lag.
    def sums_by_mount(name):
        return {x[0].get("mount"): x[1] for x in prom.query(f"sum by (mount) ({name})")}

    def caught_up():
        want = {name: {MOUNT: own_sum(name, MOUNT), ODD: own_sum(name, ODD)}
                for name in (HITS, REQS, UFS, FROM_CACHE, CACHED)}
        got = {name: sums_by_mount(name) for name in want}
        caught_up.last = (got, want)
        return got == want
    try:
        wait_until(caught_up, LAG_TIMEOUT, "Prometheus sums to equal the workers'", interval=0.25)
    except TimeoutError:
        raise AssertionError(f"Prometheus (got) vs workers (want): {caught_up.last}")
    sel = f"{{mount={_promql_str(MOUNT)}}}"
    ratio = prom.scalar(f"sum({HITS}{sel}) / sum({REQS}{sel})")
    assert ratio == pytest.approx(own_sum(HITS, MOUNT) / own_sum(REQS, MOUNT)), ratio
    assert 0 < ratio < 1, ratio
    assert prom.scalar(f"sum({UFS}{sel})") == sum(len(d) for d in tree.values())
    # Per instance too, and the odd mount path round-trips through label escaping.
    per_instance = {x[0]["instance"]: x[1]
                    for x in prom.query(f"{HITS}{{mount={_promql_str(ODD)}}}")}
    # (A worker creates a mount's request counters at its first request for that mount.)
    assert per_instance == {a: m[per_mount(HITS, ODD)] for a, m in own.items()
                            if per_mount(HITS, ODD) in m}
    assert sum(per_instance.values()) >= 3, per_instance  # x.bin's 2 pages and y.bin

    # No scrape errors, no rejected samples, types as declared.
    for t in prom.targets("cairn"):
        assert t["lastError"] == "" and t["health"] == "up", t
    for counter in ("prometheus_target_scrapes_sample_duplicate_timestamp_total",
                    "prometheus_target_scrapes_sample_out_of_order_total",
                    "prometheus_target_scrapes_sample_out_of_bounds_total",
                    "prometheus_target_scrapes_exceeded_sample_limit_total"):
        wait_until(lambda: prom.query(counter), LAG_TIMEOUT, f"{counter} scraped", interval=0.2)
        assert [v for _, v in prom.query(counter)] == [0.0], counter
    scraped = {x[0]["instance"]: x[1] for x in prom.query('scrape_samples_scraped{job="cairn"}')}
    assert set(scraped) == set(addr) and all(v > 50 for v in scraped.values()), scraped
    meta = prom.api("metadata", metric=HITS)
    assert meta[HITS][0]["type"] == "counter", meta
    meta = prom.api("metadata", metric=CACHED)
    assert meta[CACHED][0]["type"] == "gauge", meta

    # A dead worker is seen as one: up 0 and a scrape error (the checks above can fail).
    victim = workers[0]
    victim.kill9()
    victim_addr = f"127.0.0.1:{victim.metrics_port}"
    wait_until(lambda: dict((x[0]["instance"], x[1]) for x in prom.query('up{job="cairn"}'))
               .get(victim_addr) == 0.0, LAG_TIMEOUT, "up == 0 for the killed worker",
               interval=0.2)
    errs = {t["labels"]["instance"]: t["lastError"] for t in prom.targets("cairn")}
    assert errs[victim_addr] != "", errs

    # Stop Prometheus cleanly.
    prom.proc.send_signal(signal.SIGTERM)
    rc = prom.proc.wait(timeout=30)
    assert rc == 0, f"prometheus exited {rc}: {prom.proc.log_tail()}"
