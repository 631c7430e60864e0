"""The Python SDK (issue 11): `import cairn` against a real `cairn worker`, with a read-only
file:// mount of the shared dataset (/data) and a write-through mount on s3rver (/w).

Every read is compared byte for byte with the source; writes are checked in the bucket."""

import errno
import gc
import io
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import (KiB, MiB, S3_BUCKET, S3_KEY, S3_SECRET, SIZED_FILES, UNICODE_NAME,
                      TRAIN_COUNT, many_name, sha256)


def _s3_mount(path, prefix, server, write_mode="through"):
    return {"path": path, "uri": f"s3://{S3_BUCKET}/{prefix}", "write_mode": write_mode,
            "options": {"endpoint": server.endpoint, "region": "us-east-1",
                        "access_key": S3_KEY, "secret_key": S3_SECRET}}


@pytest.fixture(scope="module")
def node(module_harness, s3server, dataset, cairn):
    """A worker serving /data (the dataset folder, read-only) and /w (s3rver, write-through);
    the config dict every client of these tests connects with."""
    config = {"mounts": [{"path": "/data", "uri": "file://" + str(dataset.root)},
                         _s3_mount("/w", "sdk", s3server),
                         _s3_mount("/wb", "sdk-back", s3server, write_mode="back")]}
    path = os.path.join(module_harness.workdir, "sdk.json")
    with open(path, "w") as f:
        json.dump(config, f)
    cache = os.path.join(module_harness.workdir, "sdk-cache")
    w = module_harness.worker([], cache, name="sdk-worker", extra=["--config", path])
    config = dict(config, workers=[f"127.0.0.1:{w.listen_port}"])
    yield w, config
    assert w.stop() == 0


@pytest.fixture
def client(cairn, node):
    c = cairn.connect(config=node[1])
    yield c
    c.close()


# -- reads -----------------------------------------------------------------------------------

def test_whole_files_read_byte_exact_through_open(client, dataset):
    for name in SIZED_FILES:
        with client.open("/data/" + name, "rb") as f:
            assert f.read() == dataset.bytes(name), name


def test_reads_go_through_the_worker(client, node, dataset):
    w = node[0]
    client.free("/data/page3.bin")
    before = w.metric("cairn_worker_requests_total")
    assert client.read_range("/data/page3.bin") == dataset.bytes("page3.bin")
    assert w.metric("cairn_worker_requests_total") > before  # Missing there: asked.
    # Again: from the client's page buffer or the worker's page files, not over the wire.
    served_here = lambda s: s["buffer_hits"] + s["short_circuit_reads"]  # noqa: E731
    before = served_here(client.stats())
    assert client.read_range("/data/page3.bin") == dataset.bytes("page3.bin")
    assert served_here(client.stats()) > before


def test_seek_tell_and_partial_reads_across_page_boundaries(client, dataset):
    data = dataset.bytes("odd-big.bin")
    rng = random.Random(7)
    with client.open("/data/odd-big.bin", "rb") as f:
        assert f.seekable() and f.readable() and not f.writable()
        for _ in range(60):
            offset = rng.choice([0, MiB - 1, MiB, 2 * MiB + 5, len(data) - 3, len(data),
                                 len(data) + 10, rng.randrange(len(data))])
            length = rng.choice([0, 1, 4095, MiB + 1, 3 * MiB])
            assert f.seek(offset) == offset and f.tell() == offset
            got = f.read(length)
            assert got == data[offset:offset + length], (offset, length)
            assert f.tell() == offset + len(got)
        assert f.seek(-10, io.SEEK_END) == len(data) - 10
        assert f.read() == data[-10:]
        with pytest.raises(OSError):
            f.seek(-1)


def test_readinto_fills_bytearray_memoryview_and_numpy_without_a_copy(client, dataset):
    import numpy as np
    data = dataset.bytes("page-plus-1.bin")
    with client.open("/data/page-plus-1.bin", "rb", buffering=0) as raw:
        buf = bytearray(MiB + 10)
        assert raw.readinto(buf) == MiB + 1
        assert bytes(buf[:MiB + 1]) == data
        raw.seek(100)
        view = memoryview(bytearray(5000))[1000:3000]
        assert raw.readinto(view) == 2000 and bytes(view) == data[100:2100]
        arr = np.zeros(1 << 16, dtype=np.uint32)  # Not bytes: cast to bytes, filled in place.
        raw.seek(0)
        assert raw.readinto(arr) == arr.nbytes
        assert arr.tobytes() == data[:arr.nbytes]
        with pytest.raises((TypeError, ValueError, BufferError)):
            raw.readinto(b"immutable")


def test_text_mode_and_buffered_lines(client, dataset):
    assert client.open("/data/dir one/x.txt", "r", encoding="latin-1").read() == \
        dataset.bytes("dir one/x.txt").decode("latin-1")
    with client.open("/data/" + UNICODE_NAME, "rb") as f:
        assert f.read(10) == dataset.bytes(UNICODE_NAME)[:10]


def test_read_range_and_read_many_are_byte_exact(client, dataset):
    data = dataset.bytes("odd-big.bin")
    assert client.read_range("/data/odd-big.bin", MiB - 7, 20) == data[MiB - 7:MiB + 13]
    assert client.read_range("/data/odd-big.bin", len(data) - 5) == data[-5:]
    assert client.read_range("/data/odd-big.bin", len(data) + 5, 10) == b""
    assert client.read_range("/data/empty.bin") == b""
    rng = random.Random(3)
    names = list(SIZED_FILES)
    requests = []
    for _ in range(200):
        name = rng.choice(names)
        size = SIZED_FILES[name]
        offset = rng.randrange(size + 2)
        requests.append(("/data/" + name, offset, rng.choice([-1, None, 0, 1, 70000, MiB])))
    got = client.read_many(requests, parallelism=8)
    assert len(got) == len(requests)
    for (path, offset, length), out in zip(requests, got):
        src = dataset.bytes(path[len("/data/"):])
        end = len(src) if length in (-1, None) else offset + length
        assert out == src[offset:end], (path, offset, length)
    many = client.read_many([("/data/many/" + many_name(i), 0, -1) for i in range(500)])
    for i, out in enumerate(many):
        assert out == dataset.bytes("many/" + many_name(i))


def test_stat_ls_walk_exists(client, dataset):
    info = client.stat("/data/page3.bin")
    assert (info.size, info.is_dir, info.name, info.path) == (3 * MiB, False, "page3.bin",
                                                              "/data/page3.bin")
    assert info.version and info.mtime > 0
    assert client.stat("/data/dir one").is_dir
    assert client.stat("/").is_dir
    top = client.ls("/data")
    assert "/data/page3.bin" in top and "/data/many" in top and top == sorted(top)
    assert len(client.ls("/data/many")) == 10_000
    detail = {e.name: e for e in client.ls("/data/dir one", detail=True)}
    assert detail["x.txt"].size == 10 and detail["sub dir"].is_dir
    assert client.ls("/data/one.bin") == ["/data/one.bin"]
    walked = {}
    for top_dir, dirs, files in client.walk("/data/dir one"):
        walked[top_dir] = (sorted(dirs), sorted(files))
    assert walked == {"/data/dir one": (["sub dir"], ["x.txt"]),
                      "/data/dir one/sub dir": ([], ["deep file.bin"])}
    assert client.exists("/data/one.bin") and not client.exists("/data/nope")
    assert client.isdir("/data/many") and client.isfile("/data/one.bin")
    assert not client.isfile("/data/many") and not client.isdir("/data/nope")


def test_errors_map_to_the_usual_exceptions(client, cairn):
    with pytest.raises(FileNotFoundError) as e:
        client.open("/data/missing.bin")
    assert e.value.filename == "/data/missing.bin" and e.value.errno == errno.ENOENT
    with pytest.raises(FileNotFoundError):
        client.stat("/nomount/x")
    with pytest.raises(FileNotFoundError):
        client.read_many([("/data/one.bin", 0, 1), ("/data/missing.bin", 0, 1)])
    with pytest.raises(IsADirectoryError):
        client.open("/data/many")
    with pytest.raises(ValueError):
        client.open("relative/path")
    with pytest.raises(ValueError):
        client.stat("/data/../etc/passwd")
    with pytest.raises(ValueError):
        client.open("/data/one.bin", "r+b")
    with pytest.raises(ValueError):
        client.read_range("/data/one.bin", -1)
    # Writes outside a writable mount: EROFS, like the FUSE mount.
    with pytest.raises(OSError) as e:
        client.open("/data/new.bin", "wb")
    assert e.value.errno == errno.EROFS
    with pytest.raises(OSError) as e:
        client.rm("/data/one.bin")
    assert e.value.errno == errno.EROFS
    with pytest.raises(OSError) as e:  # Out of a read-only mount into a writable one.
        client.rename("/data/one.bin", "/w/one.bin")
    assert e.value.errno == errno.EROFS


def test_bad_settings_are_value_errors(cairn, node, monkeypatch):
    monkeypatch.delenv("CAIRN_ETCD", raising=False)
    monkeypatch.delenv("CAIRN_CONFIG", raising=False)
    with pytest.raises(ValueError, match="no mounts"):
        cairn.connect()
    with pytest.raises(ValueError):
        cairn.connect(mounts={"/x": "gopher://nowhere"})
    with pytest.raises(ValueError):
        cairn.connect(mounts={"/x": "file:///tmp"}, etcd="127.0.0.1:1")
    with pytest.raises(ValueError):
        cairn.connect(config={"mounts": [], "bogus_field": 1})
    with pytest.raises(ValueError):
        cairn.connect(config=node[1], page_size="1000")
    with pytest.raises(OSError):
        cairn.connect(etcd="http://127.0.0.1:1", etcd_insecure_plaintext=None)


def test_a_closed_client_refuses_calls_but_open_files_finish(cairn, node, dataset):
    c = cairn.connect(config=node[1])
    f = c.open("/data/page1.bin", "rb")
    c.close()
    c.close()  # Idempotent.
    assert c.closed
    with pytest.raises(ValueError, match="closed"):
        c.stat("/data/one.bin")
    with pytest.raises(ValueError, match="closed"):
        c.open("/data/one.bin")
    f.close()
    with pytest.raises(ValueError):
        f.read(1)


def test_a_dead_worker_falls_back_to_the_source(cairn, module_harness, node, dataset):
    config = node[1]
    cache = os.path.join(module_harness.workdir, "doomed-cache")
    doomed = module_harness.worker([], cache, name="doomed",
                                   extra=["--config", os.path.join(module_harness.workdir,
                                                                   "sdk.json")])
    c = cairn.connect(config=dict(config, workers=[f"127.0.0.1:{doomed.listen_port}"]),
                      worker_timeout=1, short_circuit=False)
    try:
        assert c.read_range("/data/page1.bin") == dataset.bytes("page1.bin")
        doomed.kill9()
        assert c.read_range("/data/odd-big.bin") == dataset.bytes("odd-big.bin")
        assert c.stats()["fallback_bytes"] > 0
    finally:
        c.close()


# -- writes ------------------------------------------------------------------------------------

def test_write_read_back_and_in_the_bucket(client, s3server):
    # Three parts of a multipart upload (past the worker's one-PUT size, 16 MiB).
    data = random.Random(11).randbytes(20 * MiB + 17)
    with client.open("/w/blob.bin", "wb") as f:
        assert f.writable()
        for i in range(0, len(data), 1000003):
            f.write(memoryview(data)[i:i + 1000003])
    assert s3server.object("sdk/blob.bin") == data
    assert client.read_range("/w/blob.bin") == data
    assert client.stat("/w/blob.bin").size == len(data)


def test_seek_back_to_patch_a_header_truncate_and_append(client, s3server):
    with client.open("/w/patched.bin", "wb") as f:
        f.write(b"\0" * 8 + b"payload" * 1000)
        end = f.tell()
        f.seek(0)
        f.write(b"HEADER!!")
        f.seek(end)
        f.write(b"tail")
    want = b"HEADER!!" + b"payload" * 1000 + b"tail"
    assert s3server.object("sdk/patched.bin") == want
    with client.open("/w/patched.bin", "ab") as f:
        f.write(b"+more")
    assert s3server.object("sdk/patched.bin") == want + b"+more"
    with client.open("/w/patched.bin", "wb", buffering=0) as f:
        f.write(b"0123456789")
        f.truncate(4)
    assert s3server.object("sdk/patched.bin") == b"0123"
    with client.open("/w/notes.txt", "w") as f:
        f.write("héllo\n")
    assert s3server.object("sdk/notes.txt") == "héllo\n".encode()


def test_an_exception_in_the_with_block_leaves_nothing(client, s3server):
    with pytest.raises(RuntimeError):
        with client.open("/w/never.bin", "wb") as f:
            f.write(b"x" * MiB)
            raise RuntimeError("training crashed")
    assert s3server.object("sdk/never.bin") is None
    assert not client.exists("/w/never.bin")


def test_an_unbuffered_writer_left_by_an_exception_commits_nothing(client, s3server):
    """buffering=0 gives the raw writer (put_file and cp_file use it): leaving its with block by
    an exception discards the write too, instead of committing the part written so far over
    the object under the name."""
    with client.open("/w/raw.bin", "wb") as f:
        f.write(b"the good checkpoint")
    with pytest.raises(RuntimeError):
        with client.open("/w/raw.bin", "wb", buffering=0) as f:
            f.write(b"half")
            raise RuntimeError("copy cut short")
    assert s3server.object("sdk/raw.bin") == b"the good checkpoint"


def test_a_write_the_file_no_longer_takes_is_an_io_error_not_a_conflict(client, s3server):
    """A write or truncate of a file already closed (or being closed by another thread) is
    refused by the client's writer with FailedPrecondition; it mapped as a commit's refusal,
    FileExistsError (EEXIST), which says someone else changed the file. It is EIO."""
    native = client._core().open_write("/w/closed.bin", True, False, True)
    native.write(0, b"abc")
    native.close()
    for late in (lambda: native.write(3, b"d"), lambda: native.truncate(1)):
        with pytest.raises(OSError) as e:
            late()
        assert e.value.errno == errno.EIO, e.value
    assert s3server.object("sdk/closed.bin") == b"abc"


def test_a_file_whose_write_failed_is_not_committed_at_close(client, s3server):
    """A write the client refuses (past the largest offset) raises at once; the file is then
    discarded at close (EIO), never committed without the bytes that write was to add."""
    with client.open("/w/failed.bin", "wb") as f:
        f.write(b"the good checkpoint")
    f = client.open("/w/failed.bin", "wb", buffering=0)
    f.write(b"new")
    f.seek(1 << 51)
    with pytest.raises(OSError) as refused:
        f.write(b"x")
    assert refused.value.errno not in (None, errno.EIO, errno.EEXIST), refused.value
    with pytest.raises(OSError) as e:
        f.sync()  # Nor does a sync commit it.
    assert e.value.errno == errno.EIO
    assert s3server.object("sdk/failed.bin") == b"the good checkpoint"
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.EIO and "earlier write failed" in str(e.value)
    # A write that found no room (the write-back budget full past its wait) stays ENOSPC at
    # close, as the kernel reports a writeback that found none: it was EIO.
    f = client.open("/w/failed.bin", "wb", buffering=0)
    f.write(b"x")
    f._failed = OSError(errno.ENOSPC, "the write-back budget is full")  # What write() kept.
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.ENOSPC and "earlier write failed" in str(e.value)
    assert s3server.object("sdk/failed.bin") == b"the good checkpoint"
    # A with block left by an exception whose abort fails too: the caller sees its own
    # exception, and the file is closed.
    f = client.open("/w/failed.bin", "wb", buffering=0)
    f.write(b"x")

    class AbortFails:  # The worker unreachable when the abort is sent.
        def __init__(self, native):
            self.native = native

        def abort(self):
            self.native.abort()
            raise OSError(errno.EIO, "worker unreachable")

        def __getattr__(self, name):
            return getattr(self.native, name)

    f._native = AbortFails(f._native)
    with pytest.raises(RuntimeError):
        with f:
            raise RuntimeError("the job's own error")
    assert f.closed


def test_a_writer_freed_without_close_stalls_no_other_python_thread(cairn, module_harness, node):
    """A writer freed without a close aborts its file (a round trip to the worker, which may
    not answer), and the last reference to a client joins its threads: both without the GIL,
    so the program's other threads keep running meanwhile (they did not: every Python thread
    stood still until the worker answered or timed out)."""
    cache = os.path.join(module_harness.workdir, "stalled-cache")
    stalled = module_harness.worker([], cache, name="stalled",
                                    extra=["--config", os.path.join(module_harness.workdir,
                                                                    "sdk.json")])
    c = cairn.connect(config=dict(node[1], workers=[f"127.0.0.1:{stalled.listen_port}"]),
                      worker_timeout=5, short_circuit=False)
    held = [c._core().open_write("/w/freed.bin", True, False, True)]
    held[0].write(0, b"x" * 1000)
    c.close()  # The writer keeps the core: freeing it drops the last reference.
    freed = threading.Event()

    def free():
        held.clear()
        freed.set()

    stalled.send_signal(signal.SIGSTOP)
    try:
        t = threading.Thread(target=free)
        t.start()
        ticks = 0
        while not freed.is_set() and ticks < 50:
            time.sleep(0.01)
            ticks += 1
        assert ticks == 50, f"this thread ran {ticks} times while the writer was being freed"
    finally:
        stalled.send_signal(signal.SIGCONT)
    t.join(timeout=60)
    assert not t.is_alive()
    assert stalled.stop() == 0


def test_a_directory_is_not_opened_for_writing(client, s3server):
    with client.open("/w/isdir/run1/a.pt", "wb") as f:
        f.write(b"a")
    with pytest.raises(IsADirectoryError):
        client.open("/w/isdir/run1", "wb")
    assert s3server.object("sdk/isdir/run1") is None
    client.rm("/w/isdir/run1/a.pt")


def test_exclusive_create_sync_rename_mkdir_rm(client, s3server):
    with client.open("/w/ex.bin", "xb") as f:
        f.write(b"one")
        assert f.sync()["size"] == 3
        assert s3server.object("sdk/ex.bin") == b"one"  # Durable before close.
        f.write(b"two")
    assert s3server.object("sdk/ex.bin") == b"onetwo"
    with pytest.raises(FileExistsError):
        client.open("/w/ex.bin", "xb")
    client.mkdir("/w/ckpt/run1", parents=True)
    client.mkdir("/w/ckpt/run1", exist_ok=True)
    with pytest.raises(FileExistsError):
        client.mkdir("/w/ckpt/run1")
    assert client.isdir("/w/ckpt/run1")
    client.rename("/w/ex.bin", "/w/ckpt/run1/final.bin")
    assert s3server.object("sdk/ex.bin") is None
    assert client.read_range("/w/ckpt/run1/final.bin") == b"onetwo"
    with client.open("/w/other.bin", "wb") as f:
        f.write(b"other")
    with pytest.raises(FileExistsError):
        client.rename("/w/other.bin", "/w/ckpt/run1/final.bin", replace=False)
    with pytest.raises(OSError) as e:
        client.rmdir("/w/ckpt/run1")
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(IsADirectoryError):
        client.rm("/w/ckpt")
    client.rm("/w/ckpt", recursive=True)
    assert not client.exists("/w/ckpt/run1/final.bin") and not client.exists("/w/ckpt")
    client.rm("/w/other.bin")
    with pytest.raises(FileNotFoundError):
        client.rm("/w/other.bin")


def test_torch_save_to_a_write_back_mount_reads_back_on_another_client_before_and_after_sync(
        client, cairn, node, s3server):
    import torch
    state = {"w": torch.arange(200000, dtype=torch.float32).reshape(400, 500), "step": 7}
    with client.open("/wb/ckpt-7.pt", "wb") as f:
        torch.save(state, f)  # Returns once the file is in the worker's journal.
    other = cairn.connect(config=node[1])
    try:
        # At once, uploaded or not: the worker that holds the file serves it.
        with other.open("/wb/ckpt-7.pt", "rb") as f:
            early = torch.load(f)
        assert early["step"] == 7 and torch.equal(early["w"], state["w"])
        client.sync("/wb", timeout=60)
        assert s3server.object("sdk-back/ckpt-7.pt") is not None
        with other.open("/wb/ckpt-7.pt", "rb") as f:
            back = torch.load(f)
    finally:
        other.close()
    assert back["step"] == 7 and torch.equal(back["w"], state["w"])
    client.sync(timeout=5)  # Nothing waits: at once.
    with pytest.raises(ValueError):
        client.sync("/wb", timeout=0)


def test_torch_save_and_load_round_trip(client, cairn, node):
    import torch
    state = {"w": torch.arange(300000, dtype=torch.float32).reshape(600, 500),
             "b": torch.ones(17), "step": 1000}
    with client.open("/w/ckpt.pt", "wb") as f:
        torch.save(state, f)
    other = cairn.connect(config=node[1])  # A second client reads it back.
    try:
        with other.open("/w/ckpt.pt", "rb") as f:
            back = torch.load(f)
    finally:
        other.close()
    assert back["step"] == 1000 and torch.equal(back["w"], state["w"])
    assert torch.equal(back["b"], state["b"])


# -- the cache ---------------------------------------------------------------------------------

def test_load_free_and_cached_fraction(client):
    path = "/data/dir one"
    client.free(path)
    assert client.cached_fraction(path) == 0.0
    seen = []
    result = client.load(path, progress=seen.append)
    assert result["pages_total"] == 3 and result["pages_failed"] == 0  # 1500 KiB + 10 B.
    assert result["pages_loaded"] == 3 and result["pages_cached_before"] == 0
    assert seen and seen[-1]["pages_done"] == 3
    assert client.cached_fraction(path) == 1.0
    assert client.cached_fraction("/data/empty.bin") == 1.0
    freed = client.free(path)
    assert freed["pages_dropped"] == 3 and freed["failures"] == 0
    assert client.cached_fraction("/data/dir one/sub dir/deep file.bin") == 0.0
    with pytest.raises(ZeroDivisionError):
        client.load(path, progress=lambda p: 1 / 0)


# -- fork, pickling, threads --------------------------------------------------------------------

def _in_forked_child(check):
    """Runs `check` in a forked child; fails unless it returns True there (an exception in the
    child is reported with its repr)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if check() else 2
        except BaseException as e:
            os.write(w, repr(e).encode()[:500])
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    message = os.read(r, 1000)
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0, message or "the check was false in the child"


def test_a_forked_child_reads_with_its_own_connections(client, dataset):
    f = client.open("/data/page3.bin", "rb")
    assert f.read(10) == dataset.bytes("page3.bin")[:10]
    # The child: the parent's open file and client must keep working.
    _in_forked_child(lambda: (f.read() == dataset.bytes("page3.bin")[10:] and
                              client.read_range("/data/one.bin") == dataset.bytes("one.bin")))
    assert f.read(5) == dataset.bytes("page3.bin")[10:15]  # The parent's file is unaffected.
    f.close()


def test_a_forked_child_starts_with_the_parents_cached_metadata(cairn, node, dataset):
    # A DataLoader worker forked after its dataset listed the folder answers its stats from what
    # the parent listed (within the TTL), not from the source: a file added to the folder after
    # the parent's listing is as unknown to the child as to the parent.
    folder = dataset.root / "forkseed"
    folder.mkdir()
    try:
        for name in ("a.bin", "b.bin"):
            (folder / name).write_bytes(name.encode() * 100)
        parent = cairn.connect(config=node[1])
        assert parent.ls("/data/forkseed") == ["/data/forkseed/a.bin", "/data/forkseed/b.bin"]
        (folder / "c.bin").write_bytes(b"late")
        assert not parent.exists("/data/forkseed/c.bin")  # The parent's listing says so.
        _in_forked_child(lambda: (
            [parent.exists(f"/data/forkseed/{n}") for n in ("a.bin", "b.bin", "c.bin")]
            == [True, True, False]
            and parent.read_range("/data/forkseed/b.bin") == b"b.bin" * 100))
        # A new client (no parent) lists the folder afresh.
        fresh = cairn.connect(config=node[1])
        assert fresh.exists("/data/forkseed/c.bin")
        fresh.close()
        parent.close()
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()


def test_a_file_being_written_stays_the_parents_across_fork(client, s3server):
    f = client.open("/w/forked.bin", "wb")
    f.write(b"parent-1 ")
    f.flush()
    pid = os.fork()
    if pid == 0:  # The child may not write, commit or abort the parent's file.
        code = 3
        try:
            f.raw.write(b"child")
        except OSError as e:
            code = 0 if e.errno == errno.EBADF else 4
        except BaseException:
            code = 5
        try:
            f.raw.close()  # Forsakes it: neither commits nor aborts.
        except BaseException:
            code = 6
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    f.write(b"parent-2")
    f.close()
    assert s3server.object("sdk/forked.bin") == b"parent-1 parent-2"


def test_clients_pickle_as_their_settings(client, dataset):
    copy = pickle.loads(pickle.dumps(client))
    try:
        assert copy.read_range("/data/one.bin") == dataset.bytes("one.bin")
    finally:
        copy.close()


def test_many_threads_share_one_client(client, dataset):
    from concurrent.futures import ThreadPoolExecutor
    names = [many_name(i) for i in range(0, 10_000, 37)]

    def one(name):
        with client.open("/data/many/" + name, "rb") as f:
            return f.read() == dataset.bytes("many/" + name)
    with ThreadPoolExecutor(16) as pool:
        assert all(pool.map(one, names))


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_opening_and_closing_10000_files_does_not_leak(client, dataset):
    def run(names):
        for name in names:
            with client.open("/data/many/" + name, "rb") as f:
                assert f.read(2)
    names = [many_name(i) for i in range(10_000)]
    # A first pass fills what is meant to fill (the metadata cache, the client's page buffer:
    # about 8 KiB per tiny file, well under its cap), then RSS must stay flat.
    run(names)
    gc.collect()
    before = _rss_kib()
    run(names)
    run(names)
    gc.collect()
    grown = _rss_kib() - before
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB over 20,000 more opens"


# -- fsspec ------------------------------------------------------------------------------------

@pytest.fixture
def fs(cairn, client):
    from cairn.filesystem import CairnFileSystem
    return CairnFileSystem(client=client)


def test_fsspec_finds_the_protocol_by_its_entry_point(cairn, node, dataset, tmp_path):
    # A new interpreter that never imports cairn itself: only the package's entry point
    # (fsspec.specs) tells fsspec where the implementation is.
    config = tmp_path / "client.json"
    config.write_text(json.dumps(node[1]))
    script = (
        "import sys, fsspec\n"
        "assert 'cairn' not in sys.modules\n"
        "with fsspec.open('cairn:///data/page-plus-1.bin', 'rb') as f:\n"
        "    sys.stdout.buffer.write(f.read())\n"
        "with fsspec.open('cairn://data/dir one/x.txt', 'rb') as f:\n"
        "    sys.stdout.buffer.write(f.read())\n")
    env = dict(os.environ, CAIRN_CONFIG=str(config),
               PYTHONPATH=str(Path(cairn.__file__).parent.parent))
    out = subprocess.run(["/usr/bin/python3", "-c", script], env=env, capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == dataset.bytes("page-plus-1.bin") + dataset.bytes("dir one/x.txt")


def test_fsspec_metadata_and_ranged_reads(fs, dataset):
    info = fs.info("cairn:///data/page3.bin")
    assert info["size"] == 3 * MiB and info["type"] == "file" and info["name"] == \
        "/data/page3.bin"
    assert fs.info("/data/dir one")["type"] == "directory"
    assert fs.isdir("cairn:///data/many") and fs.isfile("/data/one.bin")
    assert not fs.exists("/data/nope") and fs.exists("/data/one.bin")
    names = fs.ls("/data/dir one", detail=False)
    assert names == ["/data/dir one/sub dir", "/data/dir one/x.txt"]
    assert fs.find("/data/dir one") == ["/data/dir one/sub dir/deep file.bin",
                                        "/data/dir one/x.txt"]
    assert sorted(fs.glob("/data/page*.bin")) == ["/data/page-minus-1.bin",
                                                  "/data/page-plus-1.bin",
                                                  "/data/page1.bin", "/data/page3.bin"]
    assert fs.du("/data/dir one") == 1500 * KiB + 10
    data = dataset.bytes("odd-big.bin")
    assert fs.cat_file("/data/odd-big.bin") == data
    assert fs.cat_file("/data/odd-big.bin", start=MiB - 3, end=MiB + 3) == data[MiB - 3:MiB + 3]
    assert fs.cat_file("/data/odd-big.bin", start=-100) == data[-100:]
    assert fs.cat_file("/data/odd-big.bin", start=10, end=-10) == data[10:-10]
    got = fs.cat_ranges(["/data/odd-big.bin", "/data/page3.bin", "/data/missing"],
                        [0, MiB, 0], [10, 2 * MiB + 1, 5])
    assert got[0] == data[:10] and got[1] == dataset.bytes("page3.bin")[MiB:2 * MiB + 1]
    assert isinstance(got[2], FileNotFoundError)
    assert fs.ukey("/data/one.bin") == fs.info("/data/one.bin")["version"]
    with fs.open("/data/odd-big.bin", "rb") as f:
        f.seek(MiB)
        assert f.read(100) == data[MiB:MiB + 100]
    with pytest.raises(FileNotFoundError):
        fs.info("/data/nope")
    with pytest.raises(FileNotFoundError):
        fs.cat_file("/data/nope")


def test_fsspec_writes_put_get_copy_move_rm(fs, s3server, tmp_path):
    fs.pipe_file("/w/fs/a.bin", b"alpha")
    assert s3server.object("sdk/fs/a.bin") == b"alpha"
    local = tmp_path / "up.bin"
    payload = random.Random(5).randbytes(3 * MiB + 5)
    local.write_bytes(payload)
    fs.put_file(str(local), "/w/fs/up.bin")
    assert s3server.object("sdk/fs/up.bin") == payload
    fs.get_file("/w/fs/up.bin", str(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == payload
    fs.cp_file("/w/fs/a.bin", "/w/fs/b.bin")
    assert fs.cat_file("/w/fs/b.bin") == b"alpha"
    fs.mv("/w/fs/b.bin", "/w/fs/c.bin")
    assert not fs.exists("/w/fs/b.bin") and fs.cat_file("/w/fs/c.bin") == b"alpha"
    fs.mv("/w/fs/c.bin", "/w/fs/c.bin")  # Onto itself: nothing happens.
    assert fs.cat_file("/w/fs/c.bin") == b"alpha"
    fs.pipe_file("/w/fs/into/keep", b"k")
    fs.mv("/w/fs/c.bin", "/w/fs/into")  # Into a directory, under its own name.
    fs.mv("/w/fs/a.bin", "/w/fs/new-dir/")  # A path ending in "/" names a directory.
    assert fs.cat_file("/w/fs/into/c.bin") == b"alpha" and not fs.exists("/w/fs/c.bin")
    assert fs.cat_file("/w/fs/new-dir/a.bin") == b"alpha" and not fs.exists("/w/fs/a.bin")
    fs.pipe_file("/w/fs/a.bin", b"alpha")
    with fs.open("/w/fs/d.txt", "w") as f:
        f.write("text")
    assert fs.cat_file("/w/fs/d.txt") == b"text"
    fs.makedirs("/w/fs/sub/deeper", exist_ok=True)
    fs.pipe_file("/w/fs/sub/deeper/x", b"x")
    fs.rm("/w/fs", recursive=True)
    assert not fs.exists("/w/fs/a.bin") and not fs.exists("/w/fs/sub/deeper/x")
    assert not any(k.startswith("sdk/fs/") for k in _keys(s3server))
    with pytest.raises(OSError) as e:
        fs.pipe_file("/data/new", b"no")
    assert e.value.errno == errno.EROFS


def test_fsspec_create_mode_never_overwrites_and_a_failed_put_leaves_the_old_object(
        fs, s3server, tmp_path):
    fs.pipe_file("/w/fsm/a.bin", b"first", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file("/w/fsm/a.bin", b"second", mode="create")
    local = tmp_path / "up.bin"
    local.write_bytes(b"local")
    with pytest.raises(FileExistsError):
        fs.put_file(str(local), "/w/fsm/a.bin", mode="create")
    assert s3server.object("sdk/fsm/a.bin") == b"first"
    fs.pipe_file("/w/fsm/a.bin", b"replaced")  # mode="overwrite", the default.
    assert s3server.object("sdk/fsm/a.bin") == b"replaced"
    with pytest.raises(ValueError):
        fs.pipe_file("/w/fsm/a.bin", b"x", mode="append")

    def failing(*_):
        raise KeyboardInterrupt  # Ctrl-C during the copy.

    class Progress:
        set_size = staticmethod(lambda size: None)
        relative_update = staticmethod(failing)

    local.write_bytes(random.Random(8).randbytes(3 * MiB))
    with pytest.raises(KeyboardInterrupt):
        fs.put_file(str(local), "/w/fsm/a.bin", callback=Progress())
    assert s3server.object("sdk/fsm/a.bin") == b"replaced"
    fs.rm("/w/fsm", recursive=True)


def _keys(server):
    out = server.client.list_objects_v2(Bucket=S3_BUCKET, Prefix="sdk/")
    return [o["Key"] for o in out.get("Contents", [])]


def test_fsspec_filesystems_pickle(fs, dataset):
    copy = pickle.loads(pickle.dumps(fs))
    assert copy.cat_file("/data/one.bin") == dataset.bytes("one.bin")


def test_pandas_reads_and_writes_cairn_urls(cairn, node, s3server):
    """pandas opens `cairn://` URLs through fsspec (storage_options are connect()'s
    arguments): metrics written as CSV and JSON lines, read back equal. (pyarrow, and so
    Parquet, is not packaged in Debian 12.)"""
    pd = pytest.importorskip("pandas")
    opts = {"config": node[1]}
    df = pd.DataFrame({"step": range(200), "loss": [1.0 / (i + 1) for i in range(200)],
                       "split": ["train", "eval"] * 100})
    df.to_csv("cairn:///w/pandas/metrics.csv", index=False, storage_options=opts)
    assert s3server.object("sdk/pandas/metrics.csv").startswith(b"step,loss,split\n")
    pd.testing.assert_frame_equal(
        pd.read_csv("cairn:///w/pandas/metrics.csv", storage_options=opts), df)
    df.to_json("cairn:///w/pandas/metrics.jsonl", orient="records", lines=True,
               storage_options=opts)
    pd.testing.assert_frame_equal(
        pd.read_json("cairn:///w/pandas/metrics.jsonl", lines=True, storage_options=opts), df)
    with pytest.raises(FileNotFoundError):
        pd.read_csv("cairn:///w/pandas/missing.csv", storage_options=opts)


# -- PyTorch -------------------------------------------------------------------------------------

def _digest(data):
    return sha256(data)


@pytest.mark.parametrize("num_workers", [0, 2, 4])
def test_dataloader_over_a_map_dataset_with_forked_workers(client, dataset, num_workers):
    import torch.utils.data as tud
    from cairn.torch import CairnDataset
    ds = CairnDataset("/data/train", decode=_digest, client=client)
    assert len(ds) == TRAIN_COUNT
    loader = tud.DataLoader(ds, batch_size=16, shuffle=True, num_workers=num_workers,
                            collate_fn=list, multiprocessing_context="fork" if num_workers
                            else None)
    seen = {}
    for epoch in range(2):
        for batch in loader:
            for digest in batch:
                seen[digest] = seen.get(digest, 0) + 1
    want = {sha256(dataset.bytes(f"train/s{i:03d}.bin")): 2 for i in range(TRAIN_COUNT)}
    assert seen == want


def _tar_shards(n_shards, per_shard, rng):
    import tarfile
    shards, samples = [], {}
    for s in range(n_shards):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for i in range(per_shard):
                key = f"{s:02d}{i:04d}"
                for ext, size in (("bin", rng.randrange(1, 70000)), ("cls", 3)):
                    data = rng.randbytes(size)
                    samples[(key, ext)] = data
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        shards.append(buf.getvalue())
    return shards, samples


def test_shard_dataset_streams_every_sample_once_over_workers_and_ranks(client):
    import torch.utils.data as tud
    from cairn.torch import CairnShardDataset
    shards, samples = _tar_shards(6, 25, random.Random(9))
    for i, data in enumerate(shards):
        with client.open(f"/w/shards/{i:02d}.tar", "wb") as f:
            f.write(data)
    got = {}
    for rank in range(2):
        ds = CairnShardDataset("/w/shards", client=client, rank=rank, num_replicas=2,
                               shuffle=True)
        loader = tud.DataLoader(ds, batch_size=None, num_workers=2,
                                multiprocessing_context="fork")
        for sample in loader:
            for ext in ("bin", "cls"):
                key = (sample["__key__"], ext)
                assert key not in got, f"{key} seen twice"
                got[key] = sample[ext]
    assert got == samples


def test_cache_aware_sampler_visits_each_index_once_across_ranks(client):
    from cairn.torch import CacheAwareSampler, CairnDataset
    ds = CairnDataset("/data/train", client=client)
    for epoch in range(2):
        seen = []
        for rank in range(3):
            sampler = CacheAwareSampler(ds, window=10, num_replicas=3, rank=rank,
                                        prefetch=False)
            sampler.set_epoch(epoch)
            mine = list(sampler)
            assert len(mine) == len(sampler)
            seen += mine
        assert sorted(seen) == list(range(len(ds)))
    first = list(CacheAwareSampler(ds, window=10, prefetch=False))
    sampler = CacheAwareSampler(ds, window=10, prefetch=False)
    sampler.set_epoch(1)
    assert list(sampler) != first  # A new order each epoch.


def test_cache_aware_sampler_reads_cached_samples_first_and_prefetches_the_rest(client):
    from cairn.torch import CacheAwareSampler, CairnDataset
    ds = CairnDataset("/data/train", client=client)
    client.free("/data/train")
    cached = set(range(0, len(ds), 3))
    for i in cached:
        client.load(ds.paths[i])
    sampler = CacheAwareSampler(ds, window=12, seed=4, prefetch=False)
    order = list(sampler)
    assert sorted(order) == list(range(len(ds)))
    # In every window the cached samples come before the missing ones.
    for w in range(0, len(order), 12):
        flags = [i in cached for i in order[w:w + 12]]
        assert flags == sorted(flags, reverse=True), (w, flags)
    assert sampler.stats["cached_first"] == len(cached)
    assert sampler.stats["missing"] == len(ds) - len(cached)
    assert client.cached_fraction("/data/train") < 0.5  # prefetch=False loaded nothing.
    # With prefetching, everything missing is loaded ahead of its turn: all cached after.
    sampler = CacheAwareSampler(ds, window=12, seed=4)
    assert sorted(sampler) == list(range(len(ds)))
    assert sampler.stats["prefetched"] > 0
    assert client.cached_fraction("/data/train") == 1.0
    # The next epoch finds every sample cached.
    sampler.set_epoch(1)
    before = sampler.stats["cached_first"]
    list(sampler)
    assert sampler.stats["cached_first"] - before == len(ds)


# -- packaging ---------------------------------------------------------------------------------

def test_pip_installs_the_package_offline(cairn_bin, tmp_path, dataset):
    """`pip install ./python` with no index: setup.py builds the extension with the project's
    CMake (here reusing the build tree the tests run from) and the dist-info carries the fsspec
    entry point."""
    target = tmp_path / "site"
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, CAIRN_BUILD_DIR=str(Path(cairn_bin).resolve().parent))
    out = subprocess.run(
        ["/usr/bin/python3", "-m", "pip", "install", "--no-build-isolation", "--no-index",
         "--no-cache-dir", "--target", str(target), str(repo / "python")],
        env=env, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stdout.decode()[-2000:] + out.stderr.decode()[-2000:]
    script = (
        "import cairn, fsspec.registry, importlib.metadata as md\n"
        f"assert cairn.__file__.startswith({str(target)!r}), cairn.__file__\n"
        "eps = [e for e in md.entry_points(group='fsspec.specs') if e.name == 'cairn']\n"
        "assert eps and eps[0].value == 'cairn.filesystem:CairnFileSystem', eps\n"
        f"c = cairn.connect(mounts={{'/d': 'file://{dataset.root}'}})\n"
        "print(c.read_range('/d/one.bin').hex())\n")
    run = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(target)), cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr.decode()
    assert bytes.fromhex(run.stdout.decode().strip()) == dataset.bytes("one.bin")
