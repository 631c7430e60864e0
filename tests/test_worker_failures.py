"""A separate `cairn worker` killed with SIGKILL: its cache survives a restart, and FUSE
readers keep getting the right bytes (from the source) while it is gone."""

import os
import random
import threading
import time

import pytest

from conftest import KiB, MiB, read_file, read_whole, wait_until


def read_direct(path, chunk=MiB):
    return read_whole(path, direct=True, chunk=chunk)



@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("wf-src")
    rng = random.Random(5)
    files = {}
    for i in range(8):  # 8 files, 1..4 pages each, odd sizes.
        name = f"warm/w{i}.bin"
        files[name] = rng.randbytes(rng.randrange(1, 4) * MiB + rng.randrange(0, 9999))
    for i in range(48):  # Enough distinct data that the readers span the kill.
        files[f"cold/c{i:02d}.bin"] = rng.randbytes(MiB + 333 * i)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root, files


@pytest.mark.parametrize("short_circuit", [False, True], ids=["over-tcp", "short-circuit"])
def test_restarted_worker_serves_from_its_cache(harness, source, short_circuit):
    """over-tcp: the client asks the worker for every page (--no-short-circuit), so the new
    worker's hit counter must move. short-circuit (the default on one machine): the client
    reads the worker's page files itself; either way nothing may come from the source."""
    root, files = source
    client_flags = [] if short_circuit else ["--no-short-circuit"]
    warm = {n: d for n, d in files.items() if n.startswith("warm/")}
    total = sum(len(d) for d in warm.values())
    pages = sum((len(d) + MiB - 1) // MiB for d in warm.values())
    cache = os.path.join(harness.workdir, "cache")
    mount = "/ds=file://" + str(root)
    w1 = harness.worker([mount], cache, name="worker1")
    addr = f"127.0.0.1:{w1.listen_port}"
    fuse = harness.fuse([mount], workers=[addr], extra=client_flags)
    for name, data in warm.items():
        assert read_direct(os.path.join(fuse.mountpoint, "ds", name)) == data
    assert w1.metric("cairn_worker_bytes_from_ufs_total") == total
    # Every page is written (asynchronously) before the crash.
    wait_until(lambda: w1.metric("cairn_cache_pages") == pages, 10, f"{pages} cached pages")
    w1.kill9()
    assert fuse.stop() == 0

    # Same cache folder, same ports; a fresh FUSE client so nothing is served from its buffers.
    w2 = harness.worker([mount], cache, listen_port=w1.listen_port,
                        metrics_port=w1.metrics_port, name="worker2")
    fuse2 = harness.fuse([mount], workers=[addr], mountpoint=fuse.mountpoint, name="fuse2",
                         extra=client_flags)
    for name, data in warm.items():
        assert read_direct(os.path.join(fuse2.mountpoint, "ds", name)) == data
    m = w2.metrics()
    assert m["cairn_worker_bytes_from_ufs_total"] == 0, m
    assert m["cairn_worker_ufs_requests_total"] == 0
    if not short_circuit:
        assert m["cairn_worker_cache_hits_total"] >= pages
        # Not "==": a reply covers whole 4 KiB checksum chunks, so two reads that split a
        # page at an unaligned offset (the kernel may) are both served their chunk.
        assert m["cairn_worker_bytes_from_cache_total"] >= total
    else:  # Otherwise this variant would silently test the TCP path twice.
        assert m["cairn_worker_cache_hits_total"] < pages, "short-circuit reads were not used"
    assert m["cairn_cache_recovered_pages"] == pages
    assert fuse2.stop() == 0
    assert w2.stop() == 0


def test_readers_survive_worker_kill(harness, source):
    root, files = source
    cold = sorted(n for n in files if n.startswith("cold/"))
    cache = os.path.join(harness.workdir, "cache")
    mount = "/ds=file://" + str(root)
    w = harness.worker([mount], cache)
    fuse = harness.fuse([mount], workers=[f"127.0.0.1:{w.listen_port}"],
                        extra=["--worker-timeout", "1s"])
    errors, done = [], []
    lock = threading.Lock()
    killed_at = []
    killed = threading.Event()

    def reader(tid):
        rng = random.Random(tid)
        mine = cold[tid::4]
        try:
            for i, name in enumerate(mine):
                # Readers 1-3 hold their second half until the kill, so there are always reads
                # left to do after it however fast the first half went; reader 0 never waits, so
                # reads are in flight when the worker dies.
                if tid != 0 and i == len(mine) // 2:
                    killed.wait(timeout=60)
                path = os.path.join(fuse.mountpoint, "ds", name)
                # Alternate whole O_DIRECT reads (every byte through the daemon) and buffered ones.
                if rng.random() < 0.5:
                    got = read_direct(path, chunk=rng.choice([128 * KiB, MiB]))
                else:
                    got = read_file(path)
                with lock:
                    done.append((time.monotonic(), name))
                if got != files[name]:
                    errors.append(f"t{tid} {name}: wrong bytes ({len(got)})")
        except Exception as e:  # Every failure is reported below.
            errors.append(f"t{tid}: {e!r}")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(done) >= 8 or not any(t.is_alive() for t in threads), 60,
                   "readers to get going")
        assert w.metric("cairn_worker_requests_total") > 0, "reads did not go to the worker"
        w.kill9()
        killed_at.append(time.monotonic())
    finally:
        killed.set()
        for t in threads:
            t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a reader hung"
    assert not errors, errors[:10]
    assert len(done) == len(cold)
    after = [n for t, n in done if t > killed_at[0]]
    assert len(after) >= 8, f"only {len(after)} files were read after the kill"
    # The mount still works once the worker is gone.
    for name in cold[:3]:
        assert read_direct(os.path.join(fuse.mountpoint, "ds", name)) == files[name]
    assert fuse.alive()
    assert fuse.stop() == 0


def test_readers_survive_frozen_worker(harness, source):
    """A worker that stops answering (SIGSTOP: connections stay open, nothing is read) is
    bounded by --worker-timeout: readers get the right bytes from the source, in bounded time."""
    root, files = source
    names = sorted(n for n in files if n.startswith("cold/"))[:6]
    cache = os.path.join(harness.workdir, "cache")
    mount = "/ds=file://" + str(root)
    w = harness.worker([mount], cache)
    fuse = harness.fuse([mount], workers=[f"127.0.0.1:{w.listen_port}"],
                        extra=["--worker-timeout", "1s"])
    # Warm the connections, then freeze the worker.
    assert read_direct(os.path.join(fuse.mountpoint, "ds", names[0])) == files[names[0]]
    w.send_signal(19)  # SIGSTOP
    try:
        errors, times = [], []

        def reader(name):
            t = time.monotonic()
            try:
                if read_direct(os.path.join(fuse.mountpoint, "ds", name)) != files[name]:
                    errors.append(f"{name}: wrong bytes")
            except Exception as e:
                errors.append(f"{name}: {e!r}")
            times.append(time.monotonic() - t)

        threads = [threading.Thread(target=reader, args=(n,)) for n in names[1:]]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        elapsed = time.monotonic() - start
    finally:
        w.send_signal(18)  # SIGCONT, so that teardown can stop it.
    assert not any(t.is_alive() for t in threads), "a reader hung on the frozen worker"
    assert not errors, errors
    assert elapsed < 30, f"reads took {elapsed:.1f}s with a frozen worker (timeout 1s): {times}"
    assert fuse.stop() == 0
