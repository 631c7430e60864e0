"""Writes through a worker (issue 10, write-through): `cairn put` and `cairn rm` against a real
`cairn worker` process and s3rver. The object appears in the bucket whole, and only when the
put returns; a put that dies half-way leaves nothing; read-only mounts refuse."""

import json
import os
import random
import signal
import subprocess
import time

import pytest

from conftest import (MiB, S3_BUCKET, S3_KEY, S3_SECRET, http_get, parse_metrics, wait_until)


def _mount(path, prefix, server, write_mode):
    return {"path": path, "uri": f"s3://{S3_BUCKET}/{prefix}", "write_mode": write_mode,
            "options": {"endpoint": server.endpoint, "region": "us-east-1",
                        "access_key": S3_KEY, "secret_key": S3_SECRET}}


@pytest.fixture(scope="module")
def setup(module_harness, s3server):
    """A worker with a write-through mount /w and a read-only mount /ro (one config file, used
    by the worker and by every client command)."""
    config = os.path.join(module_harness.workdir, "writes.json")
    with open(config, "w") as f:
        json.dump({"mounts": [_mount("/w", "writes", s3server, "through"),
                              _mount("/ro", "ro", s3server, "read-only")]}, f)
    cache = os.path.join(module_harness.workdir, "write-cache")
    w = module_harness.worker([], cache, name="write-worker", extra=["--config", config])
    worker_flags = ["--config", config, "--worker", f"127.0.0.1:{w.listen_port}"]

    def run(*args, **kw):
        return module_harness.run(list(args) + worker_flags, **kw)
    yield run, w, s3server, config
    assert w.stop() == 0


def _ok(out):
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


def test_a_put_reaches_the_bucket_whole_and_reads_back_through_the_worker(setup, tmp_path):
    run, w, server, _ = setup
    data = random.Random(1).randbytes(20 * MiB + 4321)  # Three parts of a multipart upload.
    local = tmp_path / "model.pt"
    local.write_bytes(data)
    info = json.loads(_ok(run("put", local, "/w/ckpt/model.pt", timeout=120)))
    assert info["size"] == len(data) and info["path"] == "/w/ckpt/model.pt" and info["version"]
    assert server.object("writes/ckpt/model.pt") == data
    assert _ok(run("cat", "/w/ckpt/model.pt", timeout=60)) == data
    stat = json.loads(_ok(run("stat", "/w/ckpt/model.pt")))
    assert stat["version"] == info["version"]
    status, body = http_get(w.metrics_port, "/metrics")
    metrics = parse_metrics(body)
    assert metrics["cairn_worker_write_commits_total"] >= 1
    assert metrics["cairn_worker_write_bytes_total"] >= len(data)
    assert metrics["cairn_worker_write_files_open"] == 0


def test_a_put_from_stdin_replaces_a_file(setup):
    run, _, server, _ = setup
    _ok(run("put", "-", "/w/notes.txt", input=b"first"))
    _ok(run("put", "-", "/w/notes.txt", input=b"second, longer"))
    assert server.object("writes/notes.txt") == b"second, longer"


def test_no_clobber_refuses_an_existing_file_and_keeps_it(setup):
    run, _, server, _ = setup
    _ok(run("put", "-", "/w/keep.txt", input=b"original"))
    out = run("put", "-", "/w/keep.txt", "--no-clobber", input=b"intruder")
    assert out.returncode != 0
    assert out.stderr.decode().startswith("cairn: error: ") and "exists" in out.stderr.decode()
    assert server.object("writes/keep.txt") == b"original"


def test_a_read_only_mount_refuses_writes_and_removes(setup):
    run, _, server, _ = setup
    server.put("ro/file.txt", b"precious")
    for out in (run("put", "-", "/ro/new.txt", input=b"x"), run("rm", "/ro/file.txt")):
        assert out.returncode != 0
        assert "read-only" in out.stderr.decode()
    assert server.object("ro/new.txt") is None
    assert server.object("ro/file.txt") == b"precious"


def test_rm_removes_a_file_and_says_when_there_is_none(setup):
    run, _, server, _ = setup
    _ok(run("put", "-", "/w/old.bin", input=b"old"))
    _ok(run("rm", "/w/old.bin"))
    assert server.object("writes/old.bin") is None
    out = run("rm", "/w/old.bin")
    assert out.returncode != 0 and "old.bin" in out.stderr.decode()


def test_writes_need_a_worker(module_harness, setup):
    _, _, _, config = setup
    out = module_harness.run(["put", "-", "/w/x", "--config", config], input=b"x")
    assert out.returncode != 0
    assert out.stderr.decode().startswith("cairn: error: ")
    assert "--worker or --etcd" in out.stderr.decode()


def test_a_put_killed_half_way_leaves_nothing_in_the_bucket(setup, module_harness):
    run, w, server, config = setup
    args = [module_harness.cairn_bin, "put", "-", "/w/partial.bin", "--config", config,
            "--worker", f"127.0.0.1:{w.listen_port}"]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # Past the worker's one-PUT size (16 MiB): the first parts go up while it writes.
    proc.stdin.write(random.Random(2).randbytes(20 * MiB))
    proc.stdin.flush()

    def writing():
        _, body = http_get(w.metrics_port, "/metrics")
        return parse_metrics(body)["cairn_worker_write_bytes_total"] > 0
    wait_until(writing, 20, "the worker to receive the first bytes")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert server.object("writes/partial.bin") is None
    # The worker keeps the file open until its idle timeout (then aborts it); nothing appears.
    _, body = http_get(w.metrics_port, "/metrics")
    assert parse_metrics(body)["cairn_worker_write_files_open"] >= 1
    assert server.object("writes/partial.bin") is None


def test_a_file_held_open_longer_than_the_idle_timeout_keeps_its_writes(module_harness, setup):
    """A worker aborts a file open for writing after its idle timeout without a request, so that
    a client that died does not hold it for ever (here --write-idle-timeout 2s instead of 3
    minutes). A file held open through the mount and written now and then (a training log)
    must not be aborted: the client keeps its handle alive (KeepWrite, protocol v13). Before,
    its next write failed with EIO and nothing it wrote reached the bucket. A client killed
    while it holds a file still loses it to the timeout."""
    _, _, server, config = setup
    w = module_harness.worker([], os.path.join(module_harness.workdir, "idle-cache"),
                              name="idle-worker",
                              extra=["--config", config, "--write-idle-timeout", "2s"])
    fuse = module_harness.fuse([], workers=[f"127.0.0.1:{w.listen_port}"],
                               extra=["--config", config], name="idle-fuse")
    folder = os.path.join(fuse.mountpoint, "w", "logs")
    os.makedirs(folder, exist_ok=True)
    lines = [f"epoch {i}: loss {1.0 / (i + 1):.4f}\n".encode() for i in range(3)]
    with open(os.path.join(folder, "train.log"), "wb", buffering=0) as log:
        for line in lines:
            log.write(line)
            time.sleep(3.5)  # Longer than the worker's idle timeout, and its reaper's round.
    assert server.object("writes/logs/train.log") == b"".join(lines)

    args = [module_harness.cairn_bin, "put", "-", "/w/logs/abandoned.bin", "--config", config,
            "--worker", f"127.0.0.1:{w.listen_port}"]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def files_open():
        return parse_metrics(http_get(w.metrics_port, "/metrics")[1])[
            "cairn_worker_write_files_open"]
    try:
        proc.stdin.write(random.Random(5).randbytes(2 * MiB))
        proc.stdin.flush()
        wait_until(lambda: files_open() == 1, 30, "the put's file to be open")
    finally:
        proc.kill()
        proc.wait()
    wait_until(lambda: files_open() == 0, 15, "the killed put's file to be aborted")
    assert server.object("writes/logs/abandoned.bin") is None
    assert fuse.stop() == 0
    assert w.stop() == 0
