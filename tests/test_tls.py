"""TLS on the page protocol (issue 9, docs/security.md): `cairn cert`, workers and clients with
mutual TLS in cluster mode (replica copies between workers go over TLS too), the refusal of
plaintext clients, and a worker that will not serve plaintext beyond loopback.

Real processes, real certificates made by `cairn cert`, a real etcd (tests/cluster_util.py)."""

import json
import os
import ssl

import pytest

from cluster_util import PAGES, UFS_BYTES, one_error_line
from conftest import S3_BUCKET, free_port, http_get, read_whole, wait_until
from security_util import etcd_flags, pki, small_lake, tls_cluster, tls_flags  # noqa: F401

TLS_REFUSED = "cairn_worker_connections_tls_refused_total"
PEER_FILLS = "cairn_worker_peer_fills_total"
MOUNT = "/tls/lake"


def test_a_tls_cluster_serves_and_replicates_over_mutual_tls(tls_cluster, pki, tmp_path):
    """Every hop encrypted and both ends authenticated: clients and workers to etcd (https,
    client certificates), clients to workers and workers to workers (mutual TLS)."""
    cluster = tls_cluster
    lake = small_lake(tmp_path)
    for wid in ("w1", "w2"):
        cluster.start_worker(wid, extra=[*tls_flags(pki, wid), *etcd_flags(pki, wid)])
    r = cluster.cli(["mount", "add", MOUNT, lake.uri, "--replicas", "2",
                     *etcd_flags(pki, "team-a")])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    client = [*tls_flags(pki, "team-a"), *etcd_flags(pki, "team-a")]
    fuse = cluster.fuse(extra=[*client, "--no-short-circuit"])
    for name, data in lake.files.items():
        got = read_whole(os.path.join(fuse.mountpoint, MOUNT.lstrip("/"), name))
        assert got == data, f"{name}: {len(got)} bytes differ from the source's {len(data)}"

    # Every page on both workers, read from the source once: the second copy came from the
    # other worker, over a worker-to-worker TLS connection with the node certificates.
    pages = lake.pages()
    wait_until(lambda: cluster.metric_sum(PAGES) >= 2 * pages, 15, f"{2 * pages} pages cached")
    assert cluster.metric_sum(PAGES) == 2 * pages
    assert cluster.metric_sum(PEER_FILLS) == pages
    assert cluster.metric_sum(UFS_BYTES) == lake.bytes()
    assert cluster.metric_sum(TLS_REFUSED) == 0

    # A client without TLS to the workers is refused by name; its read falls back to the source
    # and succeeds.
    r = cluster.cli(["cat", f"{MOUNT}/a.bin", "--no-short-circuit", *etcd_flags(pki, "team-a")])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout == lake.files["a.bin"]
    assert b"this worker requires TLS" in r.stderr, r.stderr.decode(errors="replace")
    assert cluster.metric_sum(TLS_REFUSED) >= 1

    # A TLS client without a certificate is refused by the workers (mutual TLS).
    no_cert = ["--tls-ca", str(pki / "ca.crt"), *etcd_flags(pki, "team-a")]
    r = cluster.cli(["cat", f"{MOUNT}/b.bin", "--no-short-circuit", *no_cert])
    assert r.returncode == 0 and r.stdout == lake.files["b.bin"]
    assert b"certificate required" in r.stderr, r.stderr.decode(errors="replace")
    assert cluster.metric_sum(UFS_BYTES) == lake.bytes(), "refused clients got nothing served"

    # etcd refuses a client without a certificate, and a client that does not trust etcd's CA
    # refuses etcd: one clear line each, exit 1.
    r = cluster.cli(["mount", "ls", "--etcd-ca", str(pki / "ca.crt")])
    assert r.returncode == 1
    assert "--etcd-cert" in one_error_line(r.stderr)
    r = cluster.cli(["mount", "ls", *etcd_flags(pki, "team-a")[2:]])
    assert r.returncode == 1
    assert "certificate" in one_error_line(r.stderr).lower()
    r = cluster.cli(["mount", "ls", "--json", *etcd_flags(pki, "team-a")])
    assert r.returncode == 0 and MOUNT.encode() in r.stdout


def test_a_tls_worker_serves_metrics_over_https(tls_cluster, pki):
    """A TLS worker's /metrics and /healthz are https with its node certificate: /healthz for
    any client (probes have no certificate), /metrics only with a certificate of the cluster's
    CA; a plaintext request is told to use TLS. `cairn status` scrapes it with --tls-*."""
    cluster = tls_cluster
    w = cluster.start_worker("w1", extra=[*tls_flags(pki, "w1"), *etcd_flags(pki, "w1")])
    assert w.metrics_tls, "the harness scrapes TLS workers over https"
    ca_only = (pki / "ca.crt", None, None)
    assert http_get(w.metrics_port, "/healthz", tls=ca_only) == (200, "ok\n")
    status, body = http_get(w.metrics_port, "/metrics", tls=ca_only)
    assert status == 403 and "client certificate" in body, (status, body)
    team = (pki / "ca.crt", pki / "team-a.crt", pki / "team-a.key")
    status, body = http_get(w.metrics_port, "/metrics", tls=team)
    assert status == 200 and "cairn_cache_pages" in body, status
    status, body = http_get(w.metrics_port, "/metrics")
    assert status == 400 and "requires TLS" in body, (status, body)
    # A client that does not trust the worker's CA refuses it.
    with pytest.raises(ssl.SSLError):
        http_get(w.metrics_port, "/healthz", tls=(pki / "w1.crt", None, None))

    def status_json(*flags):
        r = cluster.cli(["status", "--json", *etcd_flags(pki, "team-a"), *flags])
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return json.loads(r.stdout)["workers"][0]

    up = status_json(*tls_flags(pki, "team-a"))
    assert up["state"] == "up" and up["metrics_tls"] is True, up
    assert up["capacity_bytes"] > 0
    blind = status_json()
    assert blind["state"] == "unreachable" and "--tls-ca" in blind["error"], blind
    anonymous = status_json("--tls-ca", str(pki / "ca.crt"))
    assert anonymous["state"] == "unreachable" and "HTTP 403" in anonymous["error"], anonymous


def test_a_worker_refuses_to_serve_plaintext_beyond_loopback(harness, tmp_path, pki):
    lake = small_lake(tmp_path)
    base = ["worker", "--mount", f"/d={lake.uri}", "--cache-dir", str(tmp_path / "cache"),
            "--cache-size", "64MiB", "--metrics-listen", "off"]
    r = harness.run([*base, "--listen", f"0.0.0.0:{free_port()}"], timeout=20)
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "serve plaintext on 0.0.0.0" in line and "--insecure-plaintext" in line, line
    # Nor metrics: a loopback page service does not make 0.0.0.0 metrics private.
    r = harness.run([*base[:-2], "--listen", f"127.0.0.1:{free_port()}",
                     "--metrics-listen", f"0.0.0.0:{free_port()}"], timeout=20)
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "/metrics in plaintext on 0.0.0.0" in line and "--metrics-insecure-plaintext" in line

    # A certificate whose key is another's is refused at start, naming the file.
    bad = ["--tls-ca", str(pki / "ca.crt"), "--tls-cert", str(pki / "w1.crt"),
           "--tls-key", str(pki / "w2.key")]
    r = harness.run([*base, "--listen", f"0.0.0.0:{free_port()}", *bad], timeout=20)
    assert r.returncode == 1
    assert "w2.key" in one_error_line(r.stderr)


def test_cert_command_errors_are_one_line(harness, pki, tmp_path):
    def err(*args):
        r = harness.run(["cert", *args])
        assert r.returncode == 1, (args, r.returncode, r.stdout, r.stderr)
        return one_error_line(r.stderr)

    assert "needs at least one host" in err("issue", "w3", "--ca", pki, "--out", tmp_path)
    assert "exists" in err("issue", "w1", "--ca", pki, "--host", "127.0.0.1", "--out", pki)
    assert "exists" in err("ca", "--out", pki)
    assert "neither a host name nor an IP" in err("issue", "w4", "--ca", pki, "--host", "a b",
                                                  "--out", tmp_path)
    assert "ca.crt" in err("issue", "w5", "--ca", tmp_path / "nowhere", "--host", "x",
                           "--out", tmp_path)
    # NAME names the files: no way out of --out.
    assert "start with '.'" in err("issue", "../escape", "--client", "--ca", pki, "--out", pki)
    assert "may only contain" in err("issue", "a/b", "--client", "--ca", pki, "--out", pki)
    assert not (pki.parent / "escape.key").exists()
    r = harness.run(["cert", "show", pki / "team-a.crt"])
    assert r.returncode == 0
    assert b"principal: team-a" in r.stdout and b"expires in 364 days" in r.stdout, r.stdout
    assert "not a PEM certificate" in err("show", pki / "team-a.key")


def test_a_secret_key_flag_is_hidden_from_other_users(harness, s3server, tmp_path):
    """--secret-key is overwritten in the process's arguments once parsed: /proc/PID/cmdline,
    readable by every user of the machine, stops showing it (and the process says so)."""
    w = harness.worker([f"/s3=s3://{S3_BUCKET}/none"], str(tmp_path / "cache"), s3=s3server)
    args = open(f"/proc/{w.pid}/cmdline", "rb").read().split(b"\0")
    secret = s3server.flags()[s3server.flags().index("--secret-key") + 1].encode()
    shown = args[args.index(b"--secret-key") + 1]
    assert shown == b"*" * len(secret), args
    wait_until(lambda: "readable by other users" in w.log_tail(50), 5, "the warning")
