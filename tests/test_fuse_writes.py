"""Writes through a FUSE mount of a write-through mount (issue 10, step 3): `cairn up
--write-mode through` over a folder and over s3rver. close(2) returns once the file is in the
source, whole; what is not supported yet is refused with a documented errno (docs/fuse.md)."""

import errno
import os
import random
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import MiB, S3_BUCKET, read_file, read_whole, start_s3server, wait_until


_RW_PROCESS = {}  # The `cairn up` of the rw fixture, for its metrics.


@pytest.fixture(scope="module")
def rw(module_harness, tmp_path_factory):
    src = tmp_path_factory.mktemp("rw-src")
    (src / "existing.bin").write_bytes(b"0123456789")
    (src / "dir").mkdir()
    up = module_harness.up("file://" + str(src), name="up-rw", extra=["--write-mode", "through"])
    _RW_PROCESS["up"] = up
    yield up.mountpoint, src
    assert up.stop() == 0


def test_a_file_written_through_the_mount_is_in_the_source_whole_at_close(rw):
    mnt, src = rw
    data = random.Random(1).randbytes(20 * MiB + 12345)
    path = os.path.join(mnt, "dir", "model.bin")
    with open(path, "wb") as f:
        for i in range(0, len(data), 3 * MiB + 7):
            f.write(data[i:i + 3 * MiB + 7])
        f.flush()
        # Open for writing: this mount already shows it, with what was written so far.
        assert os.stat(path).st_size == len(data)
        assert not (src / "dir" / "model.bin").exists()
    assert (src / "dir" / "model.bin").read_bytes() == data
    assert read_file(path) == data
    st = os.stat(path)
    assert st.st_size == len(data) and st.st_mode & 0o777 == 0o644
    assert "model.bin" in os.listdir(os.path.join(mnt, "dir"))


def _save_shards(folder, count):
    """Writes `count` new files as a sharded checkpoint does: open(O_CREAT|O_TRUNC), write,
    close; returns their contents."""
    os.makedirs(folder, exist_ok=True)
    shards = [random.Random(i).randbytes(4096 + i) for i in range(count)]
    for i, data in enumerate(shards):
        with open(os.path.join(folder, f"shard-{i:03d}.pt"), "wb") as f:
            f.write(data)
    return shards


def test_a_new_file_is_created_on_the_strength_of_the_kernels_lookup(rw):
    """The kernel looks a name up before it creates it; the worker takes that lookup's "no such
    file" instead of asking the source again (protocol v10 SEEN_ABSENT) when the lookup asked
    the source (here: the first file of each new folder, whose listing it fetched; later names
    in a folder are answered from the listing this client keeps up to date, and the worker
    asks the source itself)."""
    mnt, src = rw
    up = _RW_PROCESS["up"]
    before = up.metric("cairn_worker_write_opens_seen_absent_total")
    shards = []
    for i in range(5):
        shards += _save_shards(os.path.join(mnt, "sharded", f"rank-{i}"), 1)
    assert up.metric("cairn_worker_write_opens_seen_absent_total") == before + 5
    for i, data in enumerate(shards):
        assert (src / "sharded" / f"rank-{i}" / "shard-000.pt").read_bytes() == data
    # A create over an existing name still asks (the lookup found the file).
    with open(os.path.join(mnt, "sharded", "rank-0", "shard-000.pt"), "wb") as f:
        f.write(b"again")
    assert up.metric("cairn_worker_write_opens_seen_absent_total") == before + 5
    assert (src / "sharded" / "rank-0" / "shard-000.pt").read_bytes() == b"again"


def test_many_files_written_into_one_folder_all_show(rw):
    """Each commit updates this client's cached listing of the folder instead of dropping it:
    every file shows in the listing and stats with its size, and reads back."""
    mnt, src = rw
    folder = os.path.join(mnt, "many")
    shards = _save_shards(folder, 30)
    names = sorted(os.listdir(folder))
    assert names == [f"shard-{i:03d}.pt" for i in range(30)]
    for i, data in enumerate(shards):
        path = os.path.join(folder, f"shard-{i:03d}.pt")
        assert os.stat(path).st_size == len(data)
        assert read_file(path) == data
        assert (src / "many" / f"shard-{i:03d}.pt").read_bytes() == data
    os.unlink(os.path.join(folder, "shard-007.pt"))
    assert "shard-007.pt" not in os.listdir(folder)
    assert len(os.listdir(folder)) == 29


def test_a_closed_file_reads_back_from_the_cache_without_a_source_read(rw):
    mnt, _ = rw
    up = _RW_PROCESS["up"]
    data = random.Random(7).randbytes(6 * MiB + 100)  # 7 pages of 1 MiB.
    before = up.metric("cairn_worker_written_pages_cached_total")
    path = os.path.join(mnt, "restore.pt")
    with open(path, "wb") as f:
        f.write(data)
    deadline = time.monotonic() + 20
    while up.metric("cairn_worker_written_pages_cached_total") < before + 7:
        assert time.monotonic() < deadline, "the written pages never entered the cache"
        time.sleep(0.05)
    misses = up.metric("cairn_worker_cache_misses_total")
    source_reads = up.metric("cairn_worker_ufs_requests_total")
    assert read_whole(path, direct=True) == data
    assert up.metric("cairn_worker_cache_misses_total") == misses
    assert up.metric("cairn_worker_ufs_requests_total") == source_reads


def test_fsync_puts_the_file_in_the_source_before_close(rw):
    mnt, src = rw
    fd = os.open(os.path.join(mnt, "log.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"step 1\n")
        os.fsync(fd)
        assert (src / "log.txt").read_bytes() == b"step 1\n"
        os.write(fd, b"step 2\n")
        # fsync(2) of another descriptor of the file, read-only (`sync FILE` opens it so),
        # makes it durable too: it committed nothing before.
        reader = os.open(os.path.join(mnt, "log.txt"), os.O_RDONLY)
        try:
            os.fsync(reader)
        finally:
            os.close(reader)
        assert (src / "log.txt").read_bytes() == b"step 1\nstep 2\n"
        os.write(fd, b"step 3\n")
    finally:
        os.close(fd)
    assert (src / "log.txt").read_bytes() == b"step 1\nstep 2\nstep 3\n"


def test_torch_save_and_load_round_trip(rw):
    torch = pytest.importorskip("torch")
    mnt, src = rw
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    state = model.state_dict()
    path = os.path.join(mnt, "ckpt-step-1000.pt")
    torch.save(state, path)
    assert (src / "ckpt-step-1000.pt").stat().st_size == os.stat(path).st_size
    loaded = torch.load(path)
    assert loaded.keys() == state.keys()
    for key in state:
        assert torch.equal(loaded[key], state[key]), key


def test_truncate_append_and_exclusive_create(rw):
    mnt, src = rw
    path = os.path.join(mnt, "t.bin")
    with open(path, "wb") as f:
        f.write(b"a" * 100)
    os.truncate(path, 10)
    assert (src / "t.bin").read_bytes() == b"a" * 10
    with open(path, "ab") as f:
        f.write(b"b" * 5)
    assert (src / "t.bin").read_bytes() == b"a" * 10 + b"b" * 5
    with open(path, "r+b") as f:
        f.truncate(3)
    assert (src / "t.bin").read_bytes() == b"aaa"
    with pytest.raises(FileExistsError):
        open(os.path.join(mnt, "existing.bin"), "xb")
    assert (src / "existing.bin").read_bytes() == b"0123456789"
    # truncate(2) by path of a file this mount has open for writing (created here, not in the
    # source yet; and one that is): through the open file, which its close then commits.
    for name, before in (("new-open.bin", None), ("t.bin", b"aaa")):
        fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT)
        try:
            os.pwrite(fd, b"0123456789", 0)
            os.truncate(os.path.join(mnt, name), 4)
            assert os.stat(os.path.join(mnt, name)).st_size == 4
            os.pwrite(fd, b"x", 6)
        finally:
            os.close(fd)
        assert (src / name).read_bytes() == b"0123\0\0x", (name, before)


def test_an_append_that_creates_keeps_a_file_another_writer_made_since_the_listing(rw):
    """open(O_CREAT|O_APPEND) of a name this mount's cached listing does not show makes the
    kernel create it; the file may exist by then (another client wrote it into the lake). The
    create truncated it (its content lost when the append closed); only O_TRUNC empties a file
    (POSIX), so the append goes after what is there."""
    mnt, src = rw
    folder = os.path.join(mnt, "appends")
    os.mkdir(folder)
    assert os.listdir(folder) == []  # This client's listing of the folder: empty.
    (src / "appends" / "train.log").write_bytes(b"rank 0: epoch 1\n")  # Another writer.
    with open(os.path.join(folder, "train.log"), "a") as f:
        f.write("rank 1: epoch 1\n")
    assert (src / "appends" / "train.log").read_bytes() == b"rank 0: epoch 1\nrank 1: epoch 1\n"
    # O_CREAT without O_APPEND nor O_TRUNC: writes land where they are put, the rest stays.
    fd = os.open(os.path.join(folder, "train.log"), os.O_WRONLY | os.O_CREAT)
    try:
        os.pwrite(fd, b"RANK", 0)
    finally:
        os.close(fd)
    assert (src / "appends" / "train.log").read_bytes() == b"RANK 0: epoch 1\nrank 1: epoch 1\n"


def test_a_failed_commit_is_the_error_of_close(rw):
    mnt, src = rw
    path = os.path.join(mnt, "contended.bin")
    exclusive = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(exclusive, b"exclusive")
    # A second open of the file while it is being created; it commits first.
    other = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(other, b"other")
    os.close(other)
    assert (src / "contended.bin").read_bytes() == b"other"
    with pytest.raises(OSError) as info:
        os.close(exclusive)
    assert info.value.errno == errno.EEXIST
    assert (src / "contended.bin").read_bytes() == b"other"


def test_unlink_removes_from_the_source(rw):
    mnt, src = rw
    path = os.path.join(mnt, "gone.txt")
    with open(path, "wb") as f:
        f.write(b"soon gone")
    os.unlink(path)
    assert not (src / "gone.txt").exists()
    with pytest.raises(FileNotFoundError):
        os.stat(path)


def test_a_file_unlinked_while_open_is_never_committed(rw):
    """POSIX: the name of an open file can be unlinked; its descriptors still read and write,
    and its data goes with the last close (tempfile.TemporaryFile is mkstemp, then unlink).
    The unlink said ENOENT for a file not yet committed, and the close committed it anyway."""
    mnt, src = rw
    path = os.path.join(mnt, "dir", "scratch.tmp")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"spill")
    os.unlink(path)
    assert not os.path.exists(path)
    os.write(fd, b" more")
    assert os.pread(fd, 10, 0) == b"spill more"
    os.fsync(fd)
    os.close(fd)
    assert not (src / "dir" / "scratch.tmp").exists() and not os.path.exists(path)
    # A committed file unlinked while open for writing: gone from the source, and its close
    # does not bring it back.
    with open(path, "wb") as f:
        f.write(b"committed")
    assert (src / "dir" / "scratch.tmp").read_bytes() == b"committed"
    with open(path, "r+b") as f:
        f.write(b"C")
        os.unlink(path)
    assert not (src / "dir" / "scratch.tmp").exists() and not os.path.exists(path)
    before = set(os.listdir(src / "dir"))
    with tempfile.TemporaryFile(dir=os.path.join(mnt, "dir")) as t:
        t.write(b"x" * 100_000)
        t.seek(0)
        assert t.read() == b"x" * 100_000
    assert set(os.listdir(src / "dir")) == before


def test_what_is_not_supported_yet_says_so(rw):
    mnt, src = rw
    for fn, args, code in [
            (os.chmod, (os.path.join(mnt, "existing.bin"), 0o4755), errno.EPERM),
            (os.symlink, ("existing.bin", os.path.join(mnt, "link")), errno.EPERM),
            (os.link, (os.path.join(mnt, "existing.bin"), os.path.join(mnt, "hard")),
             errno.EPERM)]:
        with pytest.raises(OSError) as info:
            fn(*args)
        assert info.value.errno == code, f"{fn.__name__}: {info.value!r}"
    os.utime(os.path.join(mnt, "existing.bin"))  # Accepted (touch works), no effect.
    # Modes and owners: accepted without effect (tar, rsync -a, cp -p set them).
    os.chmod(os.path.join(mnt, "existing.bin"), 0o600)
    os.chown(os.path.join(mnt, "existing.bin"), 1234, 1234)
    st = os.stat(os.path.join(mnt, "existing.bin"))
    assert (st.st_mode & 0o777, st.st_uid) == (0o644, os.getuid())


def test_a_checkpoint_saved_to_a_temporary_name_and_renamed_replaces_the_old_one(rw):
    torch = pytest.importorskip("torch")
    mnt, src = rw
    final = os.path.join(mnt, "latest.pt")
    for step in (1, 2):
        state = {"step": torch.tensor(step), "w": torch.full((256, 256), float(step))}
        tmp = final + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, final)  # The atomic-save idiom of PyTorch Lightning and friends.
        assert not os.path.exists(tmp) and not (src / "latest.pt.tmp").exists()
        assert torch.load(final)["step"].item() == step
        assert torch.load(str(src / "latest.pt"))["step"].item() == step
    assert "latest.pt.tmp" not in os.listdir(mnt)


def test_rename_moves_files_and_directories_and_refuses_what_posix_refuses(rw):
    mnt, src = rw
    with open(os.path.join(mnt, "a.txt"), "wb") as f:
        f.write(b"moved by rename")
    os.rename(os.path.join(mnt, "a.txt"), os.path.join(mnt, "dir", "b.txt"))
    assert (src / "dir" / "b.txt").read_bytes() == b"moved by rename"
    assert not (src / "a.txt").exists()
    assert read_file(os.path.join(mnt, "dir", "b.txt")) == b"moved by rename"
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(mnt, "a.txt"))
    # A folder source renames directories too, with what is inside them.
    os.mkdir(os.path.join(mnt, "run-1"))
    with open(os.path.join(mnt, "run-1", "ckpt"), "wb") as f:
        f.write(b"weights")
    os.rename(os.path.join(mnt, "run-1"), os.path.join(mnt, "run-1-done"))
    assert (src / "run-1-done" / "ckpt").read_bytes() == b"weights"
    assert read_file(os.path.join(mnt, "run-1-done", "ckpt")) == b"weights"
    assert not os.path.exists(os.path.join(mnt, "run-1"))
    subprocess.run(["mv", os.path.join(mnt, "dir", "b.txt"), os.path.join(mnt, "c.txt")],
                   check=True)
    assert (src / "c.txt").read_bytes() == b"moved by rename"
    for args, code in [
            (("missing", "x"), errno.ENOENT),
            (("c.txt", "run-1-done"), errno.EISDIR),
            (("run-1-done", "c.txt"), errno.ENOTDIR),
            (("run-1-done", "run-1-done/inside"), errno.EINVAL)]:
        with pytest.raises(OSError) as info:
            os.rename(os.path.join(mnt, args[0]), os.path.join(mnt, args[1]))
        assert info.value.errno == code, f"rename {args}: {info.value!r}"
    assert (src / "c.txt").read_bytes() == b"moved by rename"
    assert (src / "run-1-done" / "ckpt").read_bytes() == b"weights"


def test_mkdir_and_rmdir(rw):
    mnt, src = rw
    path = os.path.join(mnt, "logs")
    os.mkdir(path)
    assert (src / "logs").is_dir() and os.path.isdir(path)
    assert "logs" in os.listdir(mnt)
    with pytest.raises(FileExistsError):
        os.mkdir(path)
    with open(os.path.join(path, "x"), "wb") as f:
        f.write(b"x")
    with pytest.raises(OSError) as info:
        os.rmdir(path)
    assert info.value.errno == errno.ENOTEMPTY
    with pytest.raises(NotADirectoryError):
        os.rmdir(os.path.join(path, "x"))
    os.unlink(os.path.join(path, "x"))
    os.rmdir(path)
    assert not (src / "logs").exists() and not os.path.exists(path)
    with pytest.raises(FileNotFoundError):
        os.mkdir(os.path.join(mnt, "no", "parent"))
    os.makedirs(os.path.join(mnt, "deep", "er"))
    assert (src / "deep" / "er").is_dir()


def test_a_read_only_mount_still_refuses_writes(module_harness, tmp_path_factory):
    src = tmp_path_factory.mktemp("ro-src2")
    (src / "f").write_bytes(b"x")
    up = module_harness.up("file://" + str(src), name="up-ro2")
    with pytest.raises(OSError) as info:
        open(os.path.join(up.mountpoint, "new"), "wb")
    assert info.value.errno == errno.EROFS
    assert up.stop() == 0


def test_a_bucket_mount_renames_files_makes_directories_and_refuses_directory_renames(
        module_harness, s3server):
    up = module_harness.up(f"s3://{S3_BUCKET}/fuse-names", s3=s3server, name="up-s3-names",
                           extra=["--write-mode", "through"])
    mnt = up.mountpoint
    data = random.Random(3).randbytes(3 * MiB + 5)
    with open(os.path.join(mnt, "ckpt.tmp"), "wb") as f:
        f.write(data)
    os.replace(os.path.join(mnt, "ckpt.tmp"), os.path.join(mnt, "ckpt"))
    objects = s3server.client.list_objects_v2(Bucket=S3_BUCKET, Prefix="fuse-names/")
    assert [o["Key"] for o in objects.get("Contents", [])] == ["fuse-names/ckpt"]
    assert read_file(os.path.join(mnt, "ckpt")) == data
    # An empty directory is a "dir/" marker: it lists and stats as a directory until removed.
    os.mkdir(os.path.join(mnt, "runs"))
    assert os.path.isdir(os.path.join(mnt, "runs")) and "runs" in os.listdir(mnt)
    with open(os.path.join(mnt, "runs", "1"), "wb") as f:
        f.write(b"one")
    # No directory rename on S3: EXDEV, and mv falls back to copying and removing.
    with pytest.raises(OSError) as info:
        os.rename(os.path.join(mnt, "runs"), os.path.join(mnt, "runs-done"))
    assert info.value.errno == errno.EXDEV
    subprocess.run(["mv", os.path.join(mnt, "runs"), os.path.join(mnt, "runs-done")], check=True)
    body = s3server.client.get_object(Bucket=S3_BUCKET, Key="fuse-names/runs-done/1")["Body"]
    assert body.read() == b"one"
    assert not os.path.exists(os.path.join(mnt, "runs"))
    assert up.stop() == 0


def test_a_large_file_goes_to_s3_as_a_multipart_upload(module_harness, s3server):
    up = module_harness.up(f"s3://{S3_BUCKET}/fuse-writes", s3=s3server, name="up-s3-rw",
                           extra=["--write-mode", "through"])
    data = random.Random(2).randbytes(24 * MiB + 1)
    with open(os.path.join(up.mountpoint, "big.bin"), "wb") as f:
        f.write(data)
    body = s3server.client.get_object(Bucket=S3_BUCKET, Key="fuse-writes/big.bin")["Body"].read()
    assert body == data
    assert read_file(os.path.join(up.mountpoint, "big.bin")) == data
    assert up.stop() == 0


def test_an_fsync_racing_a_flush_waits_for_its_commit(module_harness, tmp_path):
    """close() of a duplicate descriptor commits the file (FUSE flush); an fsync() of the other
    descriptor meanwhile returns only once that commit has landed (it returned 0 at once, while
    the commit was still waiting for the lake: the commit had taken the file's written mark)."""
    s3 = start_s3server(tmp_path)
    up = module_harness.up(f"s3://{S3_BUCKET}/race", s3=s3, name="up-s3-race",
                           extra=["--write-mode", "through"])
    data = random.Random(5).randbytes(3 * MiB + 1)
    fd = os.open(os.path.join(up.mountpoint, "ckpt.pt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    dup = os.dup(fd)
    os.write(fd, data)
    errors = []

    def call(fn, arg):
        try:
            fn(arg)
        except OSError as e:
            errors.append(e)

    flush = threading.Thread(target=call, args=(os.close, dup))
    sync = threading.Thread(target=call, args=(os.fsync, fd))
    s3.proc.send_signal(signal.SIGSTOP)  # The lake takes the requests and does not answer.
    try:
        flush.start()
        time.sleep(0.5)  # Its commit is waiting for the lake.
        sync.start()
        sync.join(timeout=1.5)
        assert sync.is_alive(), "fsync returned before the commit of the writes before it"
    finally:
        s3.proc.send_signal(signal.SIGCONT)
    flush.join(timeout=120)
    sync.join(timeout=120)
    assert not flush.is_alive() and not sync.is_alive() and errors == []
    os.close(fd)
    assert s3.client.get_object(Bucket=S3_BUCKET, Key="race/ckpt.pt")["Body"].read() == data
    assert up.stop() == 0
    s3.proc.stop()


@pytest.fixture(scope="module")
def wb(module_harness, tmp_path_factory):
    src = tmp_path_factory.mktemp("wb-src")
    up = module_harness.up("file://" + str(src), name="up-wb", extra=["--write-mode", "back"])
    yield up, src
    assert up.stop() == 0


def test_write_back_close_is_durable_and_the_upload_follows(wb):
    """A write-back mount: close returns once the file is in the worker's journal; the file
    reaches the source in the background (docs/consistency.md, "Write-back mounts")."""
    up, src = wb
    data = random.Random(11).randbytes(12 * MiB + 3)
    with open(os.path.join(up.mountpoint, "model.bin"), "wb") as f:
        f.write(data)
    deadline = time.monotonic() + 30
    while not ((src / "model.bin").exists() and (src / "model.bin").read_bytes() == data):
        assert time.monotonic() < deadline, "the closed file never reached the source"
        time.sleep(0.05)
    # The file shows in the folder a moment before the upload is journaled as done.
    wait_until(lambda: up.metric("cairn_worker_write_back_pending_files") == 0, 30,
               "the upload to be journaled as done")
    assert up.metric("cairn_worker_write_back_commits_total") >= 1


def test_write_back_new_files_are_created_on_the_strength_of_the_kernels_lookup(wb):
    up, src = wb
    before = up.metric("cairn_worker_write_opens_seen_absent_total")
    absent_before = up.metric("cairn_worker_source_absent_answers_total")
    shards = _save_shards(os.path.join(up.mountpoint, "sharded"), 5)
    assert up.metric("cairn_worker_write_opens_seen_absent_total") == before + 5
    # The worker listed the new folder once; the later shards' lookups were answered from that
    # listing (a stat and a directory probe each), not by the source.
    assert up.metric("cairn_worker_source_absent_answers_total") >= absent_before + 8
    for i, data in enumerate(shards):
        wait_until(lambda: (src / "sharded" / f"shard-{i:03d}.pt").exists() and
                   (src / "sharded" / f"shard-{i:03d}.pt").read_bytes() == data, 30,
                   f"shard {i} to reach the source")


def test_write_back_torch_save_then_rename_lands_the_checkpoint(wb):
    torch = pytest.importorskip("torch")
    up, src = wb
    final = os.path.join(up.mountpoint, "latest.pt")
    for step in (1, 2):
        state = {"step": torch.tensor(step), "w": torch.full((256, 256), float(step))}
        tmp = final + ".tmp"
        torch.save(state, tmp)
        # Moves the pending upload to the final name, without waiting for it (one worker owns
        # both names); the mount shows the new name at once.
        os.replace(tmp, final)
        assert torch.load(final)["step"].item() == step
        assert not os.path.exists(tmp)
        wait_until(lambda: (src / "latest.pt").exists() and
                   torch.load(str(src / "latest.pt"))["step"].item() == step, 30,
                   "the renamed checkpoint to reach the source")
        assert not (src / "latest.pt.tmp").exists()
    assert torch.load(final)["step"].item() == 2


def test_write_back_files_read_back_through_the_mount_while_the_lake_is_down(
        module_harness, tmp_path):
    """Closed, not uploaded (the lake went down while it was written): the mount still shows
    and reads the file (stat and pages come from the worker that holds it, past the kernel's
    1 s attribute cache), and the file lands when the lake comes back."""
    torch = pytest.importorskip("torch")
    s3 = start_s3server(tmp_path)
    up = module_harness.up(f"s3://{S3_BUCKET}/fuse-outage", name="up-wb-outage", s3=s3,
                           extra=["--write-mode", "back"])
    try:
        state = {"step": torch.tensor(7), "w": torch.randn(512, 512)}
        path = os.path.join(up.mountpoint, "ckpt.pt")
        # Opened while the lake is up: a lookup of a name needs the source (an unreachable one
        # cannot say the name is free), a write-back close does not.
        with open(path, "wb") as f:
            s3.proc.stop()  # The lake goes down.
            torch.save(state, f)
        time.sleep(1.5)  # Past the kernel's attribute and entry caches.
        data = read_file(path)
        assert os.stat(path).st_size == len(data) > 512 * 512 * 4
        assert torch.equal(torch.load(path)["w"], state["w"])
        assert up.metric("cairn_worker_write_back_pending_files") == 1
        s3 = start_s3server(tmp_path, port=s3.port)  # Back, with the same bucket.
        wait_until(lambda: s3.object("fuse-outage/ckpt.pt") == data, 90,
                   "the checkpoint to reach the lake once it is back")
        wait_until(lambda: up.metric("cairn_worker_write_back_pending_files") == 0, 30,
                   "the upload to be journaled as done")
    finally:
        s3.proc.stop()
        assert up.stop() == 0


def test_write_back_new_checkpoints_are_created_while_the_lake_is_down(module_harness, tmp_path):
    """A job saves its checkpoints into a folder; the lake goes down; the next save still
    works (issue 10: a write-back mount keeps taking files through an outage): the worker
    answers the new name's lookup from its last listing of the folder (up to an hour old),
    the file waits in the journal, reads back through the mount, and lands once the lake is
    back, on the name still being absent."""
    torch = pytest.importorskip("torch")
    s3 = start_s3server(tmp_path)
    up = module_harness.up(f"s3://{S3_BUCKET}/fuse-down", name="up-wb-down", s3=s3,
                           extra=["--write-mode", "back"])
    try:
        folder = os.path.join(up.mountpoint, "ckpt")
        os.mkdir(folder)
        first = {"step": torch.tensor(1), "w": torch.randn(128, 128)}
        torch.save(first, os.path.join(folder, "step-1.pt"))
        wait_until(lambda: s3.object("fuse-down/ckpt/step-1.pt") is not None, 60,
                   "the first checkpoint to reach the lake")
        s3.proc.stop()  # The lake goes down.
        # Past the kernel's entry cache and the worker's 5 s of fresh absence: the new name's
        # lookup asks the source, which fails.
        time.sleep(6)
        second = {"step": torch.tensor(2), "w": torch.randn(128, 128)}
        path = os.path.join(folder, "step-2.pt")
        torch.save(second, path)
        assert up.metric("cairn_worker_source_outage_answers_total") >= 1
        assert up.metric("cairn_worker_write_back_pending_files") == 1
        time.sleep(1.5)
        assert torch.equal(torch.load(path)["w"], second["w"])
        with open(path, "rb") as f:
            data = f.read()
        # The checkpoint idiom: saved under a temporary name, renamed at once (within the
        # commit delay: no upload of it began, so nothing of it can be in the lake and the
        # rename does not need the lake); a scratch file written and removed likewise.
        third = {"step": torch.tensor(3), "w": torch.randn(64, 64)}
        final = os.path.join(folder, "step-3.pt")
        torch.save(third, final + ".tmp")
        os.replace(final + ".tmp", final)
        scratch = os.path.join(folder, "scratch.log")
        with open(scratch, "w") as f:
            f.write("written and removed while the lake was down\n")
        os.remove(scratch)
        time.sleep(1.5)
        assert up.metric("cairn_worker_write_back_pending_files") == 2
        assert torch.equal(torch.load(final)["w"], third["w"])
        with open(final, "rb") as f:
            third_data = f.read()
        s3 = start_s3server(tmp_path, port=s3.port)  # Back, with the same bucket.
        wait_until(lambda: s3.object("fuse-down/ckpt/step-2.pt") == data, 90,
                   "the checkpoint saved during the outage to reach the lake")
        wait_until(lambda: s3.object("fuse-down/ckpt/step-3.pt") == third_data, 90,
                   "the renamed checkpoint to reach the lake")
        wait_until(lambda: up.metric("cairn_worker_write_back_pending_files") == 0, 30,
                   "the upload to be journaled as done")
        assert up.metric("cairn_worker_write_back_conflicts_total") == 0
        for gone in ("step-3.pt.tmp", "scratch.log"):
            assert s3.object("fuse-down/ckpt/" + gone) is None, gone
    finally:
        s3.proc.stop()
        assert up.stop() == 0
