"""Authorization (issue 9, docs/security.md): `cairn acl` policies in etcd enforced by the
workers on every request, principals from client certificates and from `cairn token` tokens,
admin operations, the audit log.

Real processes over mutual TLS, certificates and token keys made by the CLI, a real https etcd."""

import os
import random
import time

import pytest

from cluster_util import (PAGES, UFS_BYTES, Cluster, etcd, one_error_line,  # noqa: F401
                          save_then_rename)
from conftest import KiB, wait_until
from lake import Lake
from security_util import etcd_flags, pki, small_lake, tls_cluster, tls_flags  # noqa: F401

MOUNT = "/auth/lake"
DENIED = "cairn_worker_requests_denied_total"
TOKENS_REFUSED = "cairn_worker_tokens_refused_total"
ACL_UPDATES = "cairn_acl_updates_total"


def ok(r):
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def test_workers_enforce_the_policy_for_certificates_and_tokens(tls_cluster, pki, harness,
                                                                tmp_path):
    cluster = tls_cluster
    lake = small_lake(tmp_path)
    for name in ("ops", "team-b"):
        ok(harness.run(["cert", "issue", name, "--client", "--ca", pki, "--out", pki]))
    ok(harness.run(["token", "keygen", "--out", pki]))
    assert oct(os.stat(pki / "token.key").st_mode & 0o777) == "0o600"
    worker_flags = ["--token-public-key", str(pki / "token.pub")]
    for wid in ("w1", "w2"):
        cluster.start_worker(wid, extra=[*tls_flags(pki, wid), *etcd_flags(pki, wid),
                                         *worker_flags])
    admin_etcd = etcd_flags(pki, "team-a")  # The operator's etcd credentials.
    ok(cluster.cli(["mount", "add", MOUNT, lake.uri, *admin_etcd]))

    def acl(*args):
        return ok(cluster.cli(["acl", *args, *admin_etcd]))

    def as_(name, args, env=None):
        return cluster.cli([*args, "--no-short-circuit", *tls_flags(pki, name), *admin_etcd],
                           env=env)

    updates = {w: cluster.metric(w, ACL_UPDATES) for w in ("w1", "w2")}
    acl("set", "team-a", f"{MOUNT}/c", "read")
    acl("set", "team-a", f"{MOUNT}/e", "read,admin")  # Does not cover e.bin (look-alike).
    acl("set", "ops", MOUNT, "admin")
    acl("set", "job-7", MOUNT, "read")
    acl("enable")
    wait_until(lambda: all(cluster.metric(w, ACL_UPDATES) >= n + 5 for w, n in updates.items()),
               10, "both workers to apply the policy")
    listed = acl("ls").stdout.decode()
    assert "enabled" in listed and "read,admin" in listed, listed
    assert acl("check", "team-a", f"{MOUNT}/c/d.bin").stdout.decode().strip() == \
        f"team-a on {MOUNT}/c/d.bin: read"
    assert acl("check", "team-a", f"{MOUNT}/e.bin").stdout.decode().strip() == \
        f"team-a on {MOUNT}/e.bin: none"

    # Granted: exact bytes. Not granted: a clear error, exit 1, and no source read for it.
    r = ok(as_("team-a", ["cat", f"{MOUNT}/c/d.bin"]))
    assert r.stdout == lake.files["c/d.bin"]
    ufs_before = cluster.metric_sum(UFS_BYTES)
    for path in ("a.bin", "e.bin"):
        r = as_("team-a", ["cat", f"{MOUNT}/{path}"])
        assert r.returncode == 1, r
        assert f"principal 'team-a' (certificate) has no read grant on {MOUNT}/{path}" in \
            one_error_line(r.stderr), r.stderr.decode(errors="replace")
    r = as_("team-b", ["cat", f"{MOUNT}/c/d.bin"])
    assert r.returncode == 1 and b"team-b" in r.stderr, r.stderr
    assert cluster.metric_sum(UFS_BYTES) == ufs_before, "a denied read reached the source"
    assert cluster.metric_sum(DENIED) >= 3

    # Admin operations need admin on the path.
    r = as_("team-a", ["load", f"{MOUNT}/c"])
    assert r.returncode != 0 and b"no admin grant" in r.stderr, r.stderr.decode(errors="replace")
    ok(as_("ops", ["load", MOUNT]))
    wait_until(lambda: cluster.metric_sum(UFS_BYTES) >= lake.bytes(), 10, "the load")
    logs = "".join(cluster.workers[w].log_tail(400) for w in ("w1", "w2"))
    assert f"audit: denied read of {MOUNT}/a.bin" in logs, logs
    assert "audit: load of" in logs and "by principal 'ops' (certificate)" in logs, logs

    # A job with a token and no client certificate.
    token = ok(harness.run(["token", "issue", "--key", pki / "token.key", "--principal",
                            "job-7", "--ttl", "1h"])).stdout.decode().strip()
    shown = ok(harness.run(["token", "show", token])).stdout.decode()
    assert "principal: job-7" in shown, shown
    job = ["--tls-ca", str(pki / "ca.crt"), "--no-short-circuit", *admin_etcd]
    env = dict(os.environ, CAIRN_TOKEN=token)
    r = ok(cluster.cli(["cat", f"{MOUNT}/a.bin", *job], env=env))
    assert r.stdout == lake.files["a.bin"]
    token_file = tmp_path / "job-7.token"
    token_file.write_text(token + "\n")
    r = ok(cluster.cli(["cat", f"{MOUNT}/b.bin", *job, "--token-file", str(token_file)]))
    assert r.stdout == lake.files["b.bin"]
    r = cluster.cli(["cat", f"{MOUNT}/a.bin", *job])  # The same job without its token.
    assert r.returncode == 1 and b"an anonymous client has no read grant" in r.stderr, r.stderr

    short = ok(harness.run(["token", "issue", "--key", pki / "token.key", "--principal",
                            "job-7", "--ttl", "1s"])).stdout.decode().strip()
    time.sleep(1.5)
    refused = cluster.metric_sum(TOKENS_REFUSED)
    r = cluster.cli(["cat", f"{MOUNT}/a.bin", *job], env=dict(os.environ, CAIRN_TOKEN=short))
    assert r.returncode == 1, r
    last = r.stderr.decode(errors="replace").strip().splitlines()[-1]
    assert last.startswith("cairn: error: worker") and "refused the token" in last, r.stderr
    assert "expired" in last, last
    assert cluster.metric_sum(TOKENS_REFUSED) > refused

    # Off again: everything is allowed; the grants are kept.
    acl("rm", "job-7", MOUNT)
    acl("disable")
    wait_until(lambda: ok(as_("team-b", ["stat", f"{MOUNT}/a.bin"])) and
               as_("team-b", ["cat", f"{MOUNT}/a.bin"]).returncode == 0, 10,
               "the disabled policy to apply")
    listed = acl("ls", "--json").stdout.decode()
    assert '"enabled": false' in listed and "job-7" not in listed and "ops" in listed, listed


def test_bad_policy_input_is_refused_with_a_clear_error(tls_cluster, pki):
    cluster = tls_cluster
    flags = etcd_flags(pki, "team-a")
    for args, needle in [(["set", "team a", "/x", "read"], "principal"),
                         (["set", "t", "x", "read"], "absolute"),
                         (["set", "t", "/x", "fly"], "unknown access"),
                         (["rm", "nobody", "/x"], "no grant")]:
        r = cluster.cli(["acl", *args, *flags])
        assert r.returncode == 1, (args, r)
        assert needle in one_error_line(r.stderr), (args, r.stderr)
    r = cluster.cli(["acl", "ls", *flags])
    assert r.returncode == 0 and b"disabled" in r.stdout, r.stdout

    # Plaintext etcd beyond loopback is refused before anything is sent, unless a reason is
    # stated (then the command goes on: here to an address nobody answers).
    r = cluster.h.run(["acl", "ls", "--etcd", "http://192.0.2.1:2379"])
    assert r.returncode == 1 and "--etcd-insecure-plaintext" in one_error_line(r.stderr), r.stderr
    r = cluster.h.run(["acl", "ls", "--etcd", "http://192.0.2.1:2379",
                       "--etcd-insecure-plaintext", "test network"], timeout=60)
    assert r.returncode == 1 and b"insecure-plaintext" not in r.stderr.split(b"error:")[-1], \
        r.stderr


def test_a_policy_that_does_not_decode_denies_everything_until_reset(tls_cluster, pki, tmp_path):
    """Fail closed: whatever a broken document meant to allow, the workers allow nothing (but
    cluster members) until an operator fixes it; `cairn acl reset` can."""
    cluster = tls_cluster
    lake = small_lake(tmp_path)
    cluster.start_worker("w1", extra=[*tls_flags(pki, "w1"), *etcd_flags(pki, "w1")])
    admin_etcd = etcd_flags(pki, "team-a")
    ok(cluster.cli(["mount", "add", MOUNT, lake.uri, *admin_etcd]))
    reader = ["cat", f"{MOUNT}/b.bin", "--no-short-circuit", *tls_flags(pki, "team-a"),
              *admin_etcd]
    assert ok(cluster.cli(reader)).stdout == lake.files["b.bin"]

    before = cluster.metric("w1", ACL_UPDATES)
    cluster.etcd.put("/cairn/v1/acl", '{"enabled": "yes", "grants": []}')
    wait_until(lambda: cluster.metric("w1", ACL_UPDATES) > before, 10, "the broken policy")
    r = cluster.cli(reader)
    assert r.returncode == 1 and b"has no read grant" in r.stderr, r.stderr
    assert "does not decode" in cluster.workers["w1"].log_tail(50)
    r = cluster.cli(["acl", "ls", *admin_etcd])
    assert r.returncode == 1 and "stored acl" in one_error_line(r.stderr), r.stderr
    r = cluster.cli(["acl", "enable", *admin_etcd])
    assert r.returncode == 1, r

    ok(cluster.cli(["acl", "reset", *admin_etcd]))
    wait_until(lambda: cluster.cli(reader).returncode == 0, 10, "reads after the reset")


def test_a_worker_serves_only_the_sources_it_allows_whatever_etcd_says(etcd, harness, tmp_path):
    """Whoever can write the mount table cannot make a worker read outside its --allow-source
    list: such a mount is not served there (clients read its source themselves, with their own
    access), the others are."""
    cluster = Cluster(harness, etcd, lease_ttl=2)
    lake = small_lake(tmp_path)
    outside = small_lake(tmp_path / "outside")
    w = cluster.start_worker("w1", extra=["--allow-source", lake.uri])
    ok(cluster.cli(["mount", "add", "/ok", lake.uri]))
    ok(cluster.cli(["mount", "add", "/evil", outside.uri]))
    wait_until(lambda: w.metrics().get("cairn_worker_mounts_refused") == 1, 10,
               "the refused mount")
    assert f"not serving mount /evil from etcd: source {outside.uri}" in w.log_tail(50)

    r = ok(cluster.cli(["cat", "/ok/a.bin", "--no-short-circuit"]))
    assert r.stdout == lake.files["a.bin"]
    r = ok(cluster.cli(["cat", "/evil/a.bin", "--no-short-circuit"]))
    assert r.stdout == outside.files["a.bin"]  # Read by the client itself.
    assert w.metric(UFS_BYTES) == len(lake.files["a.bin"]), "the worker read the refused source"

    r = harness.run(["worker", "--etcd", etcd.url, "--cache-dir", str(tmp_path / "c2"),
                     "--listen", "127.0.0.1:0", "--allow-source", "gs://bucket"])
    assert r.returncode == 1 and "allowed source" in one_error_line(r.stderr), r.stderr


def test_a_job_lists_through_the_workers_and_sees_only_its_grants(tls_cluster, pki, harness,
                                                                 tmp_path):
    """`--metadata-via-workers`: stat and listings come from the workers (with their source
    access), and a listing shows a principal only the names its read grants allow, look-alikes
    and other teams' folders hidden; through the CLI and a FUSE mount."""
    cluster = tls_cluster
    rng = random.Random(5)
    files = {"team-a/x.bin": rng.randbytes(300 * KiB), "team-a/sub/y.bin": rng.randbytes(7),
             "team-a2/secret.bin": b"s", "team-b/z.bin": b"z", "top.bin": b"t"}
    lake = Lake(tmp_path / "lake", files)
    ok(harness.run(["token", "keygen", "--out", pki]))
    for wid in ("w1", "w2"):
        cluster.start_worker(wid, extra=[*tls_flags(pki, wid), *etcd_flags(pki, wid),
                                         "--token-public-key", str(pki / "token.pub")])
    admin_etcd = etcd_flags(pki, "team-a")
    ok(cluster.cli(["mount", "add", MOUNT, lake.uri, *admin_etcd]))
    token = ok(harness.run(["token", "issue", "--key", pki / "token.key", "--principal",
                            "job-a", "--ttl", "1h"])).stdout.decode().strip()
    env = dict(os.environ, CAIRN_TOKEN=token)
    job = ["--tls-ca", str(pki / "ca.crt"), "--no-short-circuit", "--metadata-via-workers",
           *admin_etcd]

    def ls(path, extra=()):
        return ok(cluster.cli(["ls", path, *job, *extra], env=env)).stdout.decode().split()

    # No policy yet: the workers list the whole source (and count it: it is they who ask).
    asked = cluster.metric_sum("cairn_worker_metadata_requests_total")
    assert ls(MOUNT) == ["team-a/", "team-a2/", "team-b/", "top.bin"]
    assert cluster.metric_sum("cairn_worker_metadata_requests_total") > asked
    updates = {w: cluster.metric(w, ACL_UPDATES) for w in ("w1", "w2")}
    ok(cluster.cli(["acl", "set", "job-a", f"{MOUNT}/team-a", "read", *admin_etcd]))
    ok(cluster.cli(["acl", "enable", *admin_etcd]))
    wait_until(lambda: all(cluster.metric(w, ACL_UPDATES) >= n + 2 for w, n in updates.items()),
               10, "both workers to apply the policy")

    assert ls(MOUNT) == ["team-a/"]
    assert ls(f"{MOUNT}/team-a") == ["sub/", "x.bin"]
    r = ok(cluster.cli(["cat", f"{MOUNT}/team-a/x.bin", *job], env=env))
    assert r.stdout == files["team-a/x.bin"]
    for hidden in (f"{MOUNT}/team-a2", f"{MOUNT}/team-b", f"{MOUNT}/top.bin"):
        r = cluster.cli(["stat", hidden, *job], env=env)
        assert r.returncode == 1, r
        assert "principal 'job-a' (token) has no read grant on " + hidden in \
            one_error_line(r.stderr), r.stderr
    r = cluster.cli(["ls", f"{MOUNT}/team-b", *job], env=env)
    assert r.returncode == 1 and b"no read grant" in r.stderr, r.stderr

    # The same through a FUSE mount that runs as the job.
    p = cluster.fuse(extra=job, name="fuse-job", env=env)
    root = os.path.join(p.mountpoint, MOUNT.lstrip("/"))
    assert sorted(os.listdir(root)) == ["team-a"]
    assert sorted(os.listdir(os.path.join(root, "team-a"))) == ["sub", "x.bin"]
    with open(os.path.join(root, "team-a", "x.bin"), "rb") as f:
        assert f.read() == files["team-a/x.bin"]
    for hidden in ("team-b", "team-a2", "top.bin"):
        with pytest.raises(PermissionError):
            os.stat(os.path.join(root, hidden))


def test_a_checkpoint_rename_between_workers_under_mutual_tls_and_a_policy(tls_cluster, pki,
                                                                           tmp_path):
    """Over mutual TLS with a policy enabled, the owner of a temporary name passes the renamed
    write-back file to the owner of the final name with its node certificate (HandOver): the
    client's write grant on both names is checked by the worker it asked, and the other worker
    takes a cluster member's writes. Nothing waits for the lake; the lake gets the final names."""
    cluster = tls_cluster
    src = tmp_path / "wbsrc"
    src.mkdir()
    for wid in ("w1", "w2"):
        cluster.start_worker(wid, extra=[*tls_flags(pki, wid), *etcd_flags(pki, wid),
                                         "--write-back-delay", "10m"])
    admin_etcd = etcd_flags(pki, "team-a")
    ok(cluster.cli(["mount", "add", "/auth/wb", f"file://{src}", "--write-mode", "back",
                    *admin_etcd]))
    updates = {w: cluster.metric(w, ACL_UPDATES) for w in ("w1", "w2")}
    ok(cluster.cli(["acl", "set", "team-a", "/auth/wb", "read,write", *admin_etcd]))
    ok(cluster.cli(["acl", "enable", *admin_etcd]))
    wait_until(lambda: all(cluster.metric(w, ACL_UPDATES) >= n + 2 for w, n in updates.items()),
               10, "both workers to apply the policy")
    client = [*tls_flags(pki, "team-a"), *admin_etcd]
    fuse = cluster.fuse(extra=[*client, "--no-short-circuit"])
    folder = os.path.join(fuse.mountpoint, "auth", "wb")
    files = {f"step-{i:02d}.pt": random.Random(300 + i).randbytes(200 * KiB + 4099 * i)
             for i in range(8)}
    for name, data in files.items():
        save_then_rename(folder, name, data)
    assert os.listdir(src) == []  # No rename waited for an upload.
    # The ring depends only on the worker ids: 5 of these 8 renames cross workers.
    assert sum(cluster.metric(w, "cairn_worker_write_back_hand_overs_total")
               for w in ("w1", "w2")) >= 1
    assert sorted(os.listdir(folder)) == sorted(files)
    ok(cluster.cli(["sync", "/auth/wb", "--timeout", "60s", *client], timeout=90))
    assert sorted(os.listdir(src)) == sorted(files)
    for name, data in files.items():
        assert (src / name).read_bytes() == data, name
