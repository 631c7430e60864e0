"""Write-back (issue 10, part 3): close returns once the file is in the worker's journal; the
upload goes on in the background, survives kill -9 at named points, and `cairn sync` waits for
it. Against a real `cairn worker` and s3rver (and a folder source). The crash points are
CAIRN_CRASH_AT (src/common/crash_point.h): the worker kills itself with SIGKILL exactly there.

The oracle after every crash and restart: each file whose close was answered OK is complete in
the lake after `cairn sync`; nothing partial ever appears under a final name; a file whose close
was not answered is either absent or complete; a file committed just before the crash is not
uploaded again."""

import hashlib
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest

from conftest import (MiB, S3_BUCKET, S3_KEY, S3_SECRET, free_port, start_s3server, wait_until)


def _s3_mount(path, prefix, endpoint):
    return {"path": path, "uri": f"s3://{S3_BUCKET}/{prefix}", "write_mode": "back",
            "options": {"endpoint": endpoint, "region": "us-east-1", "access_key": S3_KEY,
                        "secret_key": S3_SECRET, "max_retries": "1",
                        "request_timeout_ms": "5000"}}


class WriteBackWorker:
    """A worker with write-back mounts /wb (s3rver) and /wbf (a folder), restartable on the same
    cache folder and port, and the client commands that talk to it."""

    def __init__(self, harness, endpoint, name):
        self.harness = harness
        self.folder = os.path.join(harness.workdir, f"{name}-lake")
        os.makedirs(self.folder, exist_ok=True)
        self.config = os.path.join(harness.workdir, f"{name}.json")
        with open(self.config, "w") as f:
            json.dump({"mounts": [_s3_mount("/wb", name, endpoint),
                                  {"path": "/wbf", "uri": "file://" + self.folder,
                                   "write_mode": "back"}]}, f)
        self.cache = os.path.join(harness.workdir, f"{name}-cache")
        self.port = free_port()
        self.name = name
        self.proc = None

    def start(self, crash_at=None, extra=()):
        env = dict(os.environ)
        env.pop("CAIRN_CRASH_AT", None)
        if crash_at:
            env["CAIRN_CRASH_AT"] = crash_at
        self.proc = self.harness.worker([], self.cache, listen_port=self.port, name=self.name,
                                        extra=["--config", self.config, *extra], env=env)
        return self.proc

    def run(self, *args, **kw):
        return self.harness.run(list(args) + ["--config", self.config, "--worker",
                                              f"127.0.0.1:{self.port}"], **kw)

    def put(self, data, path, **kw):
        return self.run("put", "-", path, input=data, **kw)

    def sync(self, path="/", timeout="60s"):
        seconds = int(timeout[:-1]) if timeout.endswith("s") else 60
        return self.run("sync", path, "--timeout", timeout, timeout=max(120, seconds + 60))

    def wait_crashed(self):
        wait_until(lambda: not self.proc.alive(), 30, f"{self.name} to reach its crash point")
        assert self.proc.returncode == -9, self.proc.log_tail()


def _ok(out):
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


@pytest.fixture
def wb(harness, s3server):
    w = WriteBackWorker(harness, s3server.endpoint, "wb")
    yield w, s3server
    if w.proc is not None and w.proc.alive():
        w.proc.stop()


def test_close_returns_and_sync_waits_for_the_upload(wb):
    w, s3 = wb
    w.start()
    data = random.Random(1).randbytes(20 * MiB + 99)  # A multipart upload.
    info = json.loads(_ok(w.put(data, "/wb/ckpt/model.pt", timeout=120)))
    assert info["size"] == len(data) and info["version"] == ""  # Journaled, not yet uploaded.
    _ok(w.sync("/wb"))
    assert s3.object("wb/ckpt/model.pt") == data
    folder = b"a file in a folder source\n"
    _ok(w.put(folder, "/wbf/logs/run.txt"))
    _ok(w.sync())
    with open(os.path.join(w.folder, "logs", "run.txt"), "rb") as f:
        assert f.read() == folder
    m = w.proc.metrics()
    assert m["cairn_worker_write_back_commits_total"] == 2
    assert m["cairn_worker_write_back_pending_files"] == 0
    # Once in the lake, the file reads back through the worker.
    assert _ok(w.run("cat", "/wb/ckpt/model.pt", timeout=60)) == data


def test_the_delay_before_an_upload_is_the_workers_setting(wb):
    """--write-back-delay: a closed file waits that long before its upload starts (here 10
    minutes: it is still waiting when checked), `cairn sync` starts it at once; a bad value is
    refused at start."""
    w, s3 = wb
    bad = w.harness.run(["worker", "--cache-dir", w.cache, "--write-back-delay", "2h",
                         "--config", w.config])
    assert bad.returncode != 0 and b"--write-back-delay" in bad.stderr, bad.stderr
    bad = w.harness.run(["worker", "--cache-dir", w.cache, "--write-back-delay", "soon",
                         "--config", w.config])
    assert bad.returncode != 0 and b"--write-back-delay" in bad.stderr, bad.stderr
    w.start(extra=["--write-back-delay", "10m"])
    data = random.Random(4).randbytes(MiB + 3)
    _ok(w.put(data, "/wb/delayed.bin"))
    # Well past the default 1 s; nothing has started for the lake.
    wait_until(lambda: w.proc.metrics()["cairn_worker_write_back_pending_files"] == 1, 10,
               "the file to be pending")
    time.sleep(3)
    assert s3.object("wb/delayed.bin") is None
    assert w.proc.metrics()["cairn_worker_write_back_pending_files"] == 1
    _ok(w.sync("/wb/delayed.bin"))
    assert s3.object("wb/delayed.bin") == data


def test_an_outage_of_the_source_delays_uploads_and_loses_nothing(harness, tmp_path):
    port = free_port()  # Nothing listens there yet: the lake is down.
    w = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "outage")
    w.start(extra=["--write-back-budget", "64MiB"])
    files = {f"/wb/step-{i}.pt": random.Random(i).randbytes(MiB * (i + 1) + i) for i in range(3)}
    for path, data in files.items():
        _ok(w.put(data, path, timeout=60))  # Answered although the source is unreachable.
    out = w.sync("/wb", timeout="2s")
    assert out.returncode == 1
    err = out.stderr.decode()
    assert "still wait for upload" in err and "3 file(s)" in err, err
    m = w.proc.metrics()
    assert m["cairn_worker_write_back_pending_files"] == 3
    assert m["cairn_worker_write_back_pending_bytes"] == sum(len(d) for d in files.values())
    assert m["cairn_worker_write_back_failing_files"] >= 1
    # Every client reads the files meanwhile, through the worker that holds them (another
    # process than the writer: nothing is cached on its side).
    for path, data in files.items():
        stat = json.loads(_ok(w.run("stat", path, timeout=60)))
        assert stat["size"] == len(data) and stat["version"].startswith("cairn-pending-"), stat
        assert _ok(w.run("cat", path, timeout=60)) == data
    pending_version = json.loads(_ok(w.run("stat", "/wb/step-2.pt")))["version"]
    s3 = start_s3server(tmp_path, port=port)
    try:
        _ok(w.sync("/wb", timeout="120s"))
        for path, data in files.items():
            assert s3.object("outage/" + path[len("/wb/"):]) == data
        # Uploaded: the source's version, the same bytes.
        stat = json.loads(_ok(w.run("stat", "/wb/step-2.pt")))
        assert stat["version"] != pending_version and not stat["version"].startswith("cairn-")
        assert _ok(w.run("cat", "/wb/step-2.pt", timeout=60)) == files["/wb/step-2.pt"]
    finally:
        s3.proc.stop()
        w.proc.stop()


def test_a_start_without_a_cache_disk_is_refused_and_loses_nothing(harness, tmp_path):
    """A worker with two cache disks restarted while the second is not mounted yet: its spool
    folder is a bare mount point. The start used to report the files closed into it lost (and
    a missing first disk, which holds the journal, made a new journal that swept the others'
    files); now it exits non-zero, naming the folder, and the files go up once the disk is
    back (docs/consistency.md, "A crash loses nothing acknowledged")."""
    port = free_port()  # Nothing listens there yet: the lake is down.
    w = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "disks")
    second = os.path.join(harness.workdir, "disks-cache2")
    disks = ["--cache-dir", second]
    w.start(extra=disks)
    files = {f"/wb/shard-{i}.pt": random.Random(60 + i).randbytes(MiB // 2 + i) for i in range(4)}
    for path, data in files.items():
        _ok(w.put(data, path, timeout=60))
    w.proc.stop()
    spool = os.path.join(second, "spool")
    assert [n for n in os.listdir(spool) if n.startswith("write-")], os.listdir(spool)
    os.rename(second, second + ".disk")
    os.makedirs(second)  # The mount point, its disk not mounted.
    refused = harness.run(["worker", "--cache-dir", w.cache, "--cache-dir", second,
                           "--cache-size", "256MiB", "--listen", f"127.0.0.1:{free_port()}",
                           "--metrics-listen", f"127.0.0.1:{free_port()}", "--id", "disks",
                           "--config", w.config], timeout=60)
    err = refused.stderr.decode()
    assert refused.returncode != 0, err
    assert spool in err and "mounted" in err, err
    assert "Traceback" not in err and "terminate" not in err, err
    shutil.rmtree(second)  # What the refused start made on the mount point.
    os.rename(second + ".disk", second)
    w.start(extra=disks)
    s3 = start_s3server(tmp_path, port=port)
    try:
        _ok(w.sync("/wb", timeout="120s"))
        for path, data in files.items():
            assert s3.object("disks/" + path[len("/wb/"):]) == data
        assert w.proc.metrics()["cairn_worker_write_back_conflicts_total"] == 0
    finally:
        s3.proc.stop()
        w.proc.stop()


def test_a_full_budget_blocks_writes_then_fails_them_with_enospc_after_the_wait(harness, tmp_path):
    """Issue 10: "journal full: writes block, then fail with ENOSPC after a bounded time". The
    budget counts the files still being written, not only the closed ones: a write that would
    pass it waits (the client sends it again) until uploads make room, or fails after
    --write-room-wait; nothing is dropped, nothing partial reaches the lake."""
    port = free_port()  # The lake is down: nothing that waits can go up.
    w = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "full")
    w.start(extra=["--write-back-budget", "4MiB"])
    first = random.Random(21).randbytes(3 * MiB)
    second = random.Random(22).randbytes(3 * MiB + 7)
    _ok(w.put(first, "/wb/first.bin", timeout=60))
    # No room while the lake is down: refused after the wait, with a clear error.
    began = time.monotonic()
    out = w.run("put", "--write-room-wait", "2s", "-", "/wb/second.bin", input=second,
                timeout=60)
    assert out.returncode != 0
    err = out.stderr.decode()
    assert "write-back budget is full" in err and "no room came in 2 s" in err, err
    assert time.monotonic() - began >= 2
    m = w.proc.metrics()
    assert m["cairn_worker_write_back_write_refusals_total"] >= 2
    assert m["cairn_worker_write_back_pending_files"] == 1
    assert m["cairn_worker_write_back_open_bytes"] == 0  # The refused file let go of its room.
    # Ctrl-C stops a command that waits (here `cairn sync`, which would wait 120 s).
    waiting = subprocess.Popen([harness.cairn_bin, "sync", "/wb", "--timeout", "120s",
                                "--config", w.config, "--worker", f"127.0.0.1:{w.port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    waiting.send_signal(signal.SIGINT)
    assert waiting.wait(timeout=10) == -signal.SIGINT
    # A writer that waits longer is held, not failed, and goes on once the lake is back.
    local = tmp_path / "second.bin"
    local.write_bytes(second)
    args = [harness.cairn_bin, "put", "--write-room-wait", "120s", str(local), "/wb/second.bin",
            "--config", w.config, "--worker", f"127.0.0.1:{w.port}"]
    refusals = m["cairn_worker_write_back_write_refusals_total"]
    blocked = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: w.proc.metrics()["cairn_worker_write_back_write_refusals_total"]
                   > refusals, 30, "the second writer to be refused once")
        assert blocked.poll() is None  # Still waiting for room.
        s3 = start_s3server(tmp_path, port=port)
        try:
            assert blocked.wait(timeout=120) == 0, blocked.stderr.read().decode()
            _ok(w.sync("/wb", timeout="120s"))
            assert s3.object("full/first.bin") == first
            assert s3.object("full/second.bin") == second
        finally:
            s3.proc.stop()
    finally:
        if blocked.poll() is None:
            blocked.kill()
        blocked.wait()
        w.proc.stop()


def test_a_log_appended_to_through_an_outage_lands_whole_and_an_append_waits_for_room(
        harness, tmp_path):
    """A training log appended to once an epoch through the mount while the lake is down (issue
    10: write-back keeps taking files through an outage). The file still waiting on the worker
    is the log's content, so an append (an open without truncate) needs no answer from the
    lake; one with no room in the budget for the copy it starts from is sent again by the
    client until uploads make room ("journal full: writes block"), not failed at once."""
    port = free_port()  # The lake is down until the end.
    w = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "append")
    w.start(extra=["--write-back-budget", "4MiB"])
    head = random.Random(31).randbytes(1300 * 1024)
    _ok(w.put(head, "/wb/train.log", timeout=60))
    fuse = harness.fuse([], workers=[f"127.0.0.1:{w.port}"],
                        extra=["--config", w.config, "--write-room-wait", "180s"])
    log = os.path.join(fuse.mountpoint, "wb", "train.log")
    expected = head
    for epoch in (1, 2):  # Each append keeps a copy of the log: 3 x 1.3 MiB wait now.
        line = f"epoch {epoch}: loss 0.{epoch}\n".encode()
        with open(log, "ab") as f:
            f.write(line)
        expected += line
    with open(log, "rb") as f:
        assert f.read() == expected
    assert w.proc.metrics()["cairn_worker_write_back_pending_files"] == 3
    # The third copy would pass the 4 MiB budget: the append waits for room.
    third = b"epoch 3: loss 0.3\n"
    outcome = {}

    def append():
        try:
            with open(log, "ab") as f:
                f.write(third)
            outcome["ok"] = True
        except OSError as e:
            outcome["error"] = e

    appender = threading.Thread(target=append)
    appender.start()
    s3 = None
    try:
        wait_until(lambda: w.proc.metrics()["cairn_worker_write_back_write_refusals_total"] >= 1,
                   30, "the third append to be refused for room")
        time.sleep(1)
        assert appender.is_alive() and not outcome, outcome  # Waiting, not failed.
        s3 = start_s3server(tmp_path, port=port)
        appender.join(timeout=200)
        assert outcome == {"ok": True}, outcome
        _ok(w.sync("/wb", timeout="120s"))
        assert s3.object("append/train.log") == expected + third
        assert w.proc.metrics()["cairn_worker_write_back_conflicts_total"] == 0
    finally:
        appender.join(timeout=200)
        if s3:
            s3.proc.stop()
        fuse.stop()
        w.proc.stop()


# The named points, whether the client saw its close answered (None: either; the background
# upload may reach the point before the reply leaves), and what the lake must hold after the
# restart.
CRASHES = [
    # Half a journal record on disk: the close was never answered, nothing is uploaded.
    ("write-back-journal-torn", False, "absent"),
    # The record is durable but the client was not answered: the file may be uploaded (whole).
    ("write-back-journaled", False, "whole"),
    # The upload not completed (its parts are in the lake).
    ("write-back-uploading", None, "whole"),
    # Committed; the journal does not know: not uploaded a second time.
    ("write-back-committed", None, "whole"),
]


@pytest.mark.parametrize("point,answered,after", CRASHES, ids=[c[0] for c in CRASHES])
def test_kill_9_at_a_named_point_loses_nothing_acknowledged(wb, point, answered, after):
    w, s3 = wb
    w.start()
    before = random.Random(7).randbytes(3 * MiB)
    _ok(w.put(before, "/wb/before.bin"))  # Acknowledged and uploaded before the crash.
    _ok(w.sync())
    w.proc.stop()
    w.start(crash_at=point)
    data = random.Random(8).randbytes(20 * MiB + 5)  # Several parts.
    out = w.put(data, "/wb/ckpt.pt", timeout=120)
    if answered is not None:
        assert (out.returncode == 0) == answered, out.stderr.decode()
    w.wait_crashed()
    assert s3.object("wb/ckpt.pt") in (None, data)  # Never partial.
    w.start()  # The same cache folder: the journal is replayed.
    _ok(w.sync(timeout="120s"))
    got = s3.object("wb/ckpt.pt")
    assert got == (data if after == "whole" else None)
    assert s3.object("wb/before.bin") == before
    log = w.proc.log_text()
    if point == "write-back-committed":
        assert "already in its source" in log, log[-3000:]
    m = w.proc.metrics()
    assert m["cairn_worker_write_back_pending_files"] == 0
    assert m.get("cairn_worker_write_back_conflicts_total", 0) == 0
    # Nothing is left in the spool but the journal.
    spool = os.path.join(w.cache, "spool")
    wait_until(lambda: [n for n in os.listdir(spool) if n.startswith("write-")] == [], 10,
               "the spool to empty")


@pytest.mark.parametrize("point", ["write-back-rename-deleting", "write-back-rename-deleted"])
def test_kill_9_around_a_renames_delete_of_the_old_object_loses_nothing_acknowledged(
        wb, cairn, point):
    """A rename of a waiting file that replaces an uploaded one deletes that older object
    first (it must not outlive the rename), then journals the move. A kill -9 just before the
    delete (which a lake in trouble can make minutes long) or just after it: the rename was
    never answered, and the file's close was. After the restart the file goes up under its old
    name, over the old object or onto its absence. (Before 12-07 it expected the old object
    and was set aside as a conflict after the delete; a first fix, journaling "absent" before
    the delete, set it aside when the kill came before.)"""
    w, s3 = wb
    # Closed files wait an hour unless a sync asks for them: the second one stays waiting.
    w.start(crash_at=point, extra=["--write-back-delay", "1h"])
    older = random.Random(21).randbytes(2 * MiB)
    newer = random.Random(22).randbytes(3 * MiB + 7)
    _ok(w.put(older, "/wb/step.pt.tmp"))
    _ok(w.sync("/wb/step.pt.tmp"))
    assert s3.object("wb/step.pt.tmp") == older
    _ok(w.put(newer, "/wb/step.pt.tmp"))  # Acknowledged: in the journal, not in the lake.
    client = cairn.connect(config=w.config, workers=[f"127.0.0.1:{w.port}"], worker_timeout=5)
    try:
        with pytest.raises(OSError):
            client.rename("/wb/step.pt.tmp", "/wb/step.pt")
    finally:
        client.close()
    w.wait_crashed()
    deleted = point == "write-back-rename-deleted"
    assert s3.object("wb/step.pt.tmp") == (None if deleted else older)
    w.start()
    _ok(w.sync(timeout="120s"))
    assert s3.object("wb/step.pt.tmp") == newer
    assert s3.object("wb/step.pt") is None
    m = w.proc.metrics()
    assert m.get("cairn_worker_write_back_conflicts_total", 0) == 0
    assert m["cairn_worker_write_back_pending_files"] == 0


def test_what_a_killed_upload_left_in_a_folder_source_is_removed_at_the_next_start(wb):
    """The parts of a file go to a temp file in the folder while it is written; a kill -9
    before the commit leaves that temp file there. The journal noted it: the next start
    removes it (and uploads the file again from the spool)."""
    w, _ = wb
    w.start(crash_at="write-back-uploading")
    data = random.Random(9).randbytes(20 * MiB + 5)
    w.put(data, "/wbf/ckpt.pt", timeout=120)
    w.wait_crashed()

    def temps():
        return [n for n in os.listdir(w.folder) if n.startswith(".cairn-tmp.")]
    assert temps(), os.listdir(w.folder)  # What the dead process left.
    w.start()
    _ok(w.sync(timeout="120s"))
    with open(os.path.join(w.folder, "ckpt.pt"), "rb") as f:
        assert f.read() == data
    wait_until(lambda: temps() == [], 30, "the left temp file to be removed")
    assert "aborted the upload of /wbf/ckpt.pt" in w.proc.log_text()


def test_a_remove_the_lake_cannot_answer_changes_nothing_and_works_once_it_is_back(
        harness, tmp_path):
    port = free_port()  # The lake is down while the files are closed and one removed.
    w = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "cancel")
    w.start()
    _ok(w.put(b"scratch", "/wb/tmp.bin"))
    _ok(w.put(b"weights", "/wb/ckpt.pt"))
    # Opened while the lake could not say what the name held: an older object may be there,
    # which the remove must delete, and cannot. It fails and changes nothing, as a failed
    # unlink(2) (it cancelled the waiting file before: the older object would have come back).
    out = w.run("rm", "/wb/tmp.bin")
    assert out.returncode != 0 and out.stderr.decode().startswith("cairn: error: ")
    _ok(w.run("stat", "/wb/tmp.bin"))  # Still there.
    s3 = start_s3server(tmp_path, port=port)
    try:
        _ok(w.run("rm", "/wb/tmp.bin"))  # Again, once the lake is back.
        _ok(w.sync("/", timeout="120s"))
        assert s3.object("cancel/tmp.bin") is None
        assert s3.object("cancel/ckpt.pt") == b"weights"
    finally:
        s3.proc.stop()
        w.proc.stop()


def test_checkpoint_rotation_through_an_outage_needs_no_answer_from_the_lake(harness, tmp_path):
    """Checkpoint rotation through the mount while the lake is down (issue 10): a save writes a
    temporary name and renames it, and the oldest checkpoint is removed. Their uploads are
    tried first and fail without reaching the lake (it refuses connections): nothing of them
    can be there, so the rename and the remove need no answer from it. (Before, any attempt
    counted as one that may have landed: both failed with EIO until the lake was back.)"""
    s3 = start_s3server(tmp_path)
    port = s3.port
    w = WriteBackWorker(harness, s3.endpoint, "rotate")
    w.start()
    fuse = harness.fuse([], workers=[f"127.0.0.1:{w.port}"], extra=["--config", w.config])
    folder = os.path.join(fuse.mountpoint, "wb")
    try:
        # The worker answers absences in the outage from this listing (the new names' creates
        # then expect the names absent, as a new file does).
        assert os.listdir(folder) == []
        s3.proc.stop()
        s3 = None
        old = random.Random(41).randbytes(300 * 1024)
        new = random.Random(42).randbytes(2 * MiB + 5)
        for name, data in (("step-0.pt", old), ("step-1.pt.tmp", new)):
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        wait_until(lambda: w.proc.metrics()["cairn_worker_write_back_retries_total"] >= 2, 60,
                   "both uploads to be tried and fail")
        os.replace(os.path.join(folder, "step-1.pt.tmp"), os.path.join(folder, "step-1.pt"))
        os.remove(os.path.join(folder, "step-0.pt"))
        assert not os.path.exists(os.path.join(folder, "step-0.pt"))
        assert not os.path.exists(os.path.join(folder, "step-1.pt.tmp"))
        with open(os.path.join(folder, "step-1.pt"), "rb") as f:
            assert f.read() == new
        s3 = start_s3server(tmp_path, port=port)
        _ok(w.sync("/wb", timeout="120s"))
        assert s3.object("rotate/step-1.pt") == new
        assert s3.object("rotate/step-1.pt.tmp") is None
        assert s3.object("rotate/step-0.pt") is None
        assert w.proc.metrics()["cairn_worker_write_back_conflicts_total"] == 0
    finally:
        fuse.stop()
        w.proc.stop()
        if s3:
            s3.proc.stop()


def test_in_a_cluster_each_closed_file_reads_through_the_worker_that_holds_it(harness, tmp_path):
    """Two workers (a static list): each file goes to its path's owner; before any upload (the
    lake is down) every client finds it there, for stat and for pages, whichever worker the
    ring would name for the pages themselves."""
    port = free_port()
    a = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "pair-a")
    b = WriteBackWorker(harness, f"http://127.0.0.1:{port}", "pair-b")
    b.config = a.config  # One mount table.
    a.start()
    b.start()
    workers = ["--worker", f"127.0.0.1:{a.port}", "--worker", f"127.0.0.1:{b.port}"]

    def run(*args, **kw):
        return harness.run(list(args) + ["--config", a.config, *workers], **kw)

    files = {f"/wb/part-{i:02d}.bin": random.Random(100 + i).randbytes(300_000 + 4099 * i)
             for i in range(16)}
    try:
        for path, data in files.items():
            _ok(run("put", "-", path, input=data, timeout=60))
        held = [w.proc.metrics()["cairn_worker_write_back_pending_files"] for w in (a, b)]
        assert sum(held) == len(files) and min(held) > 0, held
        for path, data in files.items():
            stat = json.loads(_ok(run("stat", path, timeout=60)))
            assert stat["size"] == len(data) and stat["version"].startswith("cairn-pending-")
            assert _ok(run("cat", path, timeout=60)) == data, path
        s3 = start_s3server(tmp_path, port=port)
        try:
            _ok(run("sync", "/wb", "--timeout", "120s", timeout=180))
            for path, data in files.items():
                assert s3.object("pair-a/" + path[len("/wb/"):]) == data
                assert _ok(run("cat", path, timeout=60)) == data
        finally:
            s3.proc.stop()
    finally:
        a.proc.stop()
        b.proc.stop()


def _write_pattern(path, size):
    """Writes `size` bytes to `path`: 1 MiB blocks of random bytes, each starting with its own
    index (a block read from the wrong offset shows); returns their SHA-256."""
    base = random.Random(5).randbytes(MiB)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(0, size, MiB):
            block = (struct.pack("<Q", i // MiB) + base[8:])[:min(MiB, size - i)]
            digest.update(block)
            f.write(block)
    return digest.hexdigest()


def _sha256_of(chunks):
    digest = hashlib.sha256()
    n = 0
    for chunk in chunks:
        digest.update(chunk)
        n += len(chunk)
    return digest.hexdigest(), n


def test_a_2_gib_file_goes_up_and_reads_back_byte_exact(wb, tmp_path):
    """Past 2^31 bytes (offsets that do not fit in 32 bits; a multipart upload of 257 parts):
    written, read back (pending or uploaded), and in the lake, byte for byte."""
    w, s3 = wb
    w.start()
    size = 2 * 1024 ** 3 + 4097
    local = tmp_path / "big.bin"
    expected = _write_pattern(local, size)
    _ok(w.run("put", str(local), "/wb/big.bin", timeout=900))
    local.unlink()

    def read_back():
        out_path = tmp_path / "back.bin"
        with open(out_path, "wb") as out:
            r = subprocess.run([w.harness.cairn_bin, "cat", "/wb/big.bin", "--config", w.config,
                                "--worker", f"127.0.0.1:{w.port}"], stdout=out,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=900)
        assert r.returncode == 0, r.stderr.decode()
        with open(out_path, "rb") as f:
            got = _sha256_of(iter(lambda: f.read(8 * MiB), b""))
        out_path.unlink()
        return got

    assert read_back() == (expected, size)
    _ok(w.sync("/wb", timeout="900s"))
    body = s3.client.get_object(Bucket=S3_BUCKET, Key="wb/big.bin")["Body"]
    assert _sha256_of(body.iter_chunks(8 * MiB)) == (expected, size)
    assert read_back() == (expected, size)
