"""`cairn ls`, `cairn stat` and `cairn cat`: straight from a file:// mount, through a worker,
and against s3://."""

import json
import os

import pytest

from conftest import (MANY_COUNT, S3_BUCKET, S3_PREFIX, SIZED_FILES, SPACE_NAME,
                      UNICODE_NAME, many_name, wait_until)


@pytest.fixture(scope="module")
def worker(module_harness, dataset):
    cache = os.path.join(module_harness.workdir, "fs-cache")
    w = module_harness.worker([f"/d=file://{dataset.root}"], cache, name="fs-worker")
    yield w
    assert w.stop() == 0


@pytest.fixture(params=["direct", "worker"])
def cli(request, module_harness, dataset):
    """Runs `cairn <sub> ...` on the namespace /d -> the dataset; returns (run, worker|None)."""
    flags = ["--mount", f"/d=file://{dataset.root}"]
    w = None
    if request.param == "worker":
        w = request.getfixturevalue("worker")
        flags += ["--worker", f"127.0.0.1:{w.listen_port}"]

    def run(sub, path, *extra):
        return module_harness.run([sub, path] + flags + list(extra), timeout=60)
    return run, w


def _ok(out):
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


def test_ls_lists_folders(cli, dataset):
    run, _ = cli
    names = _ok(run("ls", "/d")).decode().splitlines()
    expected = sorted(n + ("/" if (dataset.root / n).is_dir() else "")
                      for n in os.listdir(dataset.root))
    assert sorted(names) == expected
    assert SPACE_NAME in names and UNICODE_NAME in names and "many/" in names
    # 10,000 entries: paged listing, each name exactly once.
    many = _ok(run("ls", "/d/many")).decode().splitlines()
    assert len(many) == MANY_COUNT and sorted(many) == [many_name(i) for i in range(MANY_COUNT)]


def test_ls_json_and_long(cli, dataset):
    run, _ = cli
    entries = json.loads(_ok(run("ls", "/d", "--json")))
    by_name = {e["name"]: e for e in entries}
    for name, size in SIZED_FILES.items():
        if "/" in name:
            continue
        assert by_name[name]["type"] == "file" and by_name[name]["size"] == size, name
    assert by_name["dir one"]["type"] == "dir"
    long_lines = _ok(run("ls", "/d", "-l")).decode().splitlines()
    line = next(l for l in long_lines if l.endswith(" odd-big.bin"))
    assert line.split()[0] == "-" and int(line.split()[1]) == SIZED_FILES["odd-big.bin"]


def test_stat(cli, dataset):
    run, _ = cli
    info = json.loads(_ok(run("stat", f"/d/{UNICODE_NAME}")))
    assert info["type"] == "file" and info["size"] == SIZED_FILES[UNICODE_NAME]
    assert info["name"] == UNICODE_NAME and info["path"] == f"/d/{UNICODE_NAME}"
    assert info["version"]
    info = json.loads(_ok(run("stat", "/d/dir one")))
    assert info["type"] == "dir"
    out = run("stat", "/d/absent.bin")
    assert out.returncode == 1
    assert out.stderr.decode().startswith("cairn: error: ") and b"absent.bin" in out.stderr


@pytest.mark.parametrize("rel", ["empty.bin", "one.bin", "page3.bin", "odd-big.bin",
                                 UNICODE_NAME, "dir one/sub dir/deep file.bin"])
def test_cat_bytes(cli, dataset, rel):
    run, w = cli
    before = w.metrics() if w else None
    assert _ok(run("cat", f"/d/{rel}")) == dataset.bytes(rel)
    if w and SIZED_FILES[rel] > 0:
        after = w.metrics()
        assert after["cairn_worker_requests_total"] > before["cairn_worker_requests_total"], \
            "cat with --worker did not read through the worker"


@pytest.mark.parametrize("short_circuit", [False, True], ids=["over-tcp", "short-circuit"])
def test_repeated_cat_through_worker_needs_no_source(worker, module_harness, dataset,
                                                     short_circuit):
    flags = ["--mount", f"/d=file://{dataset.root}", "--worker", f"127.0.0.1:{worker.listen_port}"]
    if not short_circuit:
        flags.append("--no-short-circuit")
    rel = "page-plus-1.bin" if short_circuit else "page-minus-1.bin"
    assert _ok(module_harness.run(["cat", f"/d/{rel}"] + flags)) == dataset.bytes(rel)

    def second_read_without_source():
        before = worker.metrics()
        assert _ok(module_harness.run(["cat", f"/d/{rel}"] + flags)) == dataset.bytes(rel)
        after = worker.metrics()
        no_source = all(after[k] == before[k] for k in ("cairn_worker_bytes_from_ufs_total",
                                                        "cairn_worker_ufs_requests_total"))
        # Over TCP the worker serves it (a hit); short-circuit reads its page files directly.
        served = (after["cairn_worker_cache_hits_total"] > before["cairn_worker_cache_hits_total"]
                  if not short_circuit else True)
        return no_source and served
    # Pages are stored asynchronously after the first read: poll until a repeat needs no source.
    wait_until(second_read_without_source, 10, "a repeated cat served without the source")


def test_cat_missing_and_folder(cli):
    run, _ = cli
    out = run("cat", "/d/absent.bin")
    assert out.returncode == 1 and out.stderr.decode().startswith("cairn: error: ")
    out = run("cat", "/d/dir one")
    assert out.returncode == 1 and out.stderr.decode().startswith("cairn: error: ")
    assert out.stdout == b""


def test_ls_stat_cat_on_s3(module_harness, s3server, s3_dataset):
    flags = ["--mount", f"/s3=s3://{S3_BUCKET}/{S3_PREFIX}"] + s3server.flags()
    names = _ok(module_harness.run(["ls", "/s3"] + flags)).decode().splitlines()
    assert "many/" in names and UNICODE_NAME in names
    many = _ok(module_harness.run(["ls", "/s3/many"] + flags)).decode().splitlines()
    assert len(many) == MANY_COUNT
    info = json.loads(_ok(module_harness.run(["stat", "/s3/odd-big.bin"] + flags)))
    assert info["size"] == SIZED_FILES["odd-big.bin"]
    for rel in ["odd-big.bin", SPACE_NAME, "one.bin", "empty.bin"]:
        assert _ok(module_harness.run(["cat", f"/s3/{rel}"] + flags)) == s3_dataset.bytes(rel)
