"""Source protection (issue 4): a worker's --ufs-max-bandwidth / --ufs-max-concurrency and a
mount's max_bandwidth option cap what the worker reads from the source, whatever the clients ask
(here an unthrottled `cairn load` with many requests in flight). Real etcd and workers."""

import json
import time

import pytest

from cluster_util import etcd, UFS_BYTES, Cluster
from conftest import MiB
from test_cache_ops import ns, uniform_lake

MOUNT = "/lake"




def timed_load(cluster):
    t0 = time.monotonic()
    r = cluster.cli(["load", ns(), "--json", "--parallelism", "64"], timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout), took


def test_worker_bandwidth_cap_bounds_source_reads(etcd, harness, tmp_path):
    cap = 8 * MiB
    c = Cluster(harness, etcd, lease_ttl=2, cache_size="512MiB")
    w = c.start_worker("w1", extra=["--ufs-max-bandwidth", "8MiB"])
    lake = uniform_lake(tmp_path, 20, 4 * MiB)  # 80 MiB: ~10 s at the cap.
    c.mount_add(MOUNT, lake.uri)
    j, took = timed_load(c)
    assert j["bytes_from_source"] == lake.bytes() == c.metric_sum(UFS_BYTES), j
    rate = lake.bytes() / took
    print(f"\nworker cap 8 MiB/s: {rate / MiB:.2f} MiB/s over {took:.1f} s")
    # The bucket starts with a 1 MiB burst: allow it on top of the cap.
    assert rate <= 1.10 * cap + MiB / took, f"{rate / MiB:.2f} MiB/s against 8 MiB/s"
    assert rate >= 0.80 * cap, f"{rate / MiB:.2f} MiB/s: far below the cap (too slow?)"
    m = w.metrics()
    assert m.get("cairn_worker_ufs_cap_waits_total", 0) > 0, "nothing waited for the cap"


def test_mount_bandwidth_option_and_concurrency_cap(etcd, harness, tmp_path):
    c = Cluster(harness, etcd, lease_ttl=2, cache_size="512MiB")
    w = c.start_worker("w1", extra=["--ufs-max-concurrency", "2"])
    lake = uniform_lake(tmp_path, 12, 4 * MiB, name="capped")  # 48 MiB at 12 MiB/s: ~4 s.
    c.mount_add(MOUNT, lake.uri, "--option", "max_bandwidth=12MiB")
    j, took = timed_load(c)
    rate = lake.bytes() / took
    print(f"\nmount cap 12 MiB/s, worker concurrency 2: {rate / MiB:.2f} MiB/s over {took:.1f} s")
    assert rate <= 1.10 * 12 * MiB + MiB / took, f"{rate / MiB:.2f} MiB/s against 12 MiB/s"
    m = w.metrics()
    assert m["cairn_worker_ufs_effective_concurrency"] == 2, m
    # A bad option value is refused when the mount is added, not at read time.
    r = c.cli(["mount", "add", "/bad", lake.uri, "--option", "max_bandwidth=lots"])
    assert r.returncode == 1 and b"max_bandwidth" in r.stderr, r.stderr
