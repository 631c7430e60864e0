"""Secrets stay secret (issue 9, docs/security.md): source credentials given by flag or by the
environment, job tokens and token signing keys never appear in a log line at trace level, an
error message, `--help`, `/metrics` of a worker or a client, or `cairn` output, across reads,
misses, failures and refused tokens. Real processes, a real S3 server (s3rver), a real mount."""

import os
import secrets

from conftest import S3_BUCKET, S3_KEY, free_port, http_get, read_whole

PREFIX = "secrets-it"


def test_no_secret_reaches_a_log_an_error_or_an_endpoint_at_trace_level(harness, s3server,
                                                                         tmp_path):
    # s3rver does not check signatures, so every process may sign with its own secret: each one
    # is then a distinct string to look for.
    worker_secret = "wsk-" + secrets.token_hex(16)
    client_secret = "csk-" + secrets.token_hex(16)
    fuse_secret = "fsk-" + secrets.token_hex(16)
    data = os.urandom(3 * 1024 * 1024 + 11)
    s3server.put(f"{PREFIX}/a.bin", data)

    keys = tmp_path / "keys"
    keys.mkdir()
    assert harness.run(["token", "keygen", "--out", keys]).returncode == 0
    r = harness.run(["token", "issue", "--key", keys / "token.key", "--principal", "job-1",
                     "--ttl", "1h"])
    assert r.returncode == 0, r.stderr
    token = r.stdout.decode().strip()
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    signing_key = [ln for ln in (keys / "token.key").read_text().splitlines()
                   if ln and not ln.startswith("-----")]
    # What must never be seen, and a name for each in the failure message.
    hidden = {worker_secret: "the worker's --secret-key",
              client_secret: "a client's AWS_SECRET_ACCESS_KEY",
              fuse_secret: "the FUSE client's --secret-key",
              token: "the job token", token.rsplit(".", 1)[1]: "the token's signature",
              forged.rsplit(".", 1)[1]: "the forged token's signature"}
    hidden.update({line: "the token signing key" for line in signing_key})

    trace = dict(os.environ, CAIRN_LOG_LEVEL="trace")
    mount = f"/s3=s3://{S3_BUCKET}/{PREFIX}"
    endpoint = ["--endpoint", s3server.endpoint, "--region", "us-east-1"]
    w = harness.worker([mount], str(tmp_path / "cache"), env=trace,
                       extra=[*endpoint, "--access-key", S3_KEY, "--secret-key", worker_secret,
                              "--token-public-key", str(keys / "token.pub")])
    worker = f"127.0.0.1:{w.listen_port}"
    outputs = []

    def cli(args, env=None):
        r = harness.run(args, env=dict(trace, AWS_ACCESS_KEY_ID=S3_KEY,
                                       AWS_SECRET_ACCESS_KEY=client_secret, **(env or {})))
        outputs.append((" ".join(map(str, args[:2])), r.stdout + r.stderr))
        return r

    client = ["--mount", mount, "--worker", worker, *endpoint, "--no-short-circuit"]
    r = cli(["cat", "/s3/a.bin", *client, "--token", token])
    assert r.returncode == 0 and r.stdout == data, r.stderr[-2000:]
    r = cli(["cat", "/s3/missing.bin", *client], env={"CAIRN_TOKEN": token})
    assert r.returncode != 0
    r = cli(["cat", "/s3/a.bin", *client], env={"CAIRN_TOKEN": forged})
    assert r.returncode != 0 and b"refused the token" in r.stderr, r.stderr[-2000:]
    # The source itself refuses a client (a bucket that does not exist): its error path.
    r = cli(["cat", "/nope/x", "--mount", f"/nope=s3://no-such-bucket-{secrets.token_hex(4)}",
             *endpoint])
    assert r.returncode != 0
    r = cli(["cat", "--help"], env={"CAIRN_TOKEN": token})
    assert r.returncode == 0

    metrics_port = free_port()
    f = harness.fuse([mount], workers=[worker], env=dict(trace, CAIRN_TOKEN=token),
                     extra=[*endpoint, "--access-key", S3_KEY, "--secret-key", fuse_secret,
                            "--metrics-listen", f"127.0.0.1:{metrics_port}"])
    assert read_whole(os.path.join(f.mountpoint, "s3", "a.bin")) == data
    assert not os.path.exists(os.path.join(f.mountpoint, "s3", "missing.bin"))

    for name, port in (("worker", w.metrics_port), ("fuse client", metrics_port)):
        status, body = http_get(port, "/metrics")
        assert status == 200
        outputs.append((f"/metrics of the {name}", body.encode()))

    # Everything the processes wrote, now that they have done their work.
    w.stop()
    f.stop()
    for log in sorted(harness.log_dir.iterdir()):
        # The harness writes each command line at the top of its log ("$ cairn ..."): the
        # test's own words, not the process's.
        text = b"\n".join(ln for ln in log.read_bytes().split(b"\n") if not ln.startswith(b"$ "))
        outputs.append((f"log {log.name}", text))
    # Cairn logs nothing below debug; debug lines show the processes ran at the lowest level.
    assert any(b" D [" in text for where, text in outputs if where.startswith("log ")), \
        "no process logged at debug level: the scan would prove less than it says"
    for where, text in outputs:
        for value, what in hidden.items():
            assert value.encode() not in text, f"{what} appears in {where}"
