"""Shared set-up of the security tests (test_tls.py, test_auth.py): a private CA and
certificates made by `cairn cert` as an operator would, and a cluster whose etcd serves https
and requires client certificates."""

import os
import random

import pytest

from cluster_util import Cluster, Etcd
from conftest import KiB, MiB
from lake import Lake


@pytest.fixture
def pki(harness, tmp_path):
    """A CA, node certificates for w1 and w2 (127.0.0.1) and a client certificate, all made
    with `cairn cert` as an operator would."""
    d = tmp_path / "pki"
    d.mkdir()

    def cert(*args):
        r = harness.run(["cert", *args])
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return r

    cert("ca", "--out", d, "--name", "test-cluster-ca")
    for node in ("w1", "w2"):
        cert("issue", node, "--ca", d, "--host", "127.0.0.1", "--host", "localhost", "--out", d)
    cert("issue", "team-a", "--client", "--ca", d, "--out", d)
    assert oct(os.stat(d / "ca.key").st_mode & 0o777) == "0o600"
    assert oct(os.stat(d / "team-a.key").st_mode & 0o777) == "0o600"
    return d


@pytest.fixture
def tls_cluster(harness, pki, tmp_path):
    """A cluster whose etcd serves https and requires client certificates from the same CA
    (its certificate made by `cairn cert issue` too)."""
    r = harness.run(["cert", "issue", "etcd-1", "--ca", pki, "--host", "127.0.0.1", "--out", pki])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    e = Etcd(tmp_path / "etcd", tls={"ca": pki / "ca.crt", "cert": pki / "etcd-1.crt",
                                     "key": pki / "etcd-1.key",
                                     "client_cert": pki / "team-a.crt",
                                     "client_key": pki / "team-a.key"})
    e.start()
    yield Cluster(harness, e, lease_ttl=2)
    errors = harness.cleanup()  # The workers deregister while etcd still runs.
    e.stop()
    assert not errors, errors


def etcd_flags(pki, name):
    return ["--etcd-ca", str(pki / "ca.crt"), "--etcd-cert", str(pki / f"{name}.crt"),
            "--etcd-key", str(pki / f"{name}.key")]


def tls_flags(pki, name):
    return ["--tls-ca", str(pki / "ca.crt"), "--tls-cert", str(pki / f"{name}.crt"),
            "--tls-key", str(pki / f"{name}.key")]


def small_lake(tmp_path):
    rng = random.Random(9)
    sizes = {"a.bin": 3 * MiB + 17, "b.bin": MiB, "c/d.bin": 200 * KiB, "e.bin": 1}
    return Lake(tmp_path / "lake", {n: rng.randbytes(s) for n, s in sizes.items()})
