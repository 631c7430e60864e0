"""Everyday tools writing into a writable mount (issue 10): `cp -r`, `tar x`, `rsync -a` and
`git clone` (then a commit) byte-exact; a file read back while it is still being written (what
`git index-pack` does); the temporary-name-then-rename idiom atomic for a reader looping over the
final name; two writers of one path (the last to close wins, docs/consistency.md). Each runs
against a folder source in both write modes and against s3rver (write-through)."""

import errno
import filecmp
import hashlib
import os
import random
import subprocess
import threading
import time

import pytest

from conftest import MiB, S3_BUCKET, start_s3server, wait_until


class Target:
    """A writable `cairn up` mount and a way to look into its data lake."""

    def __init__(self, mode, up, lake_bytes):
        self.mode = mode
        self.up = up
        self.mnt = up.mountpoint
        self.lake_bytes = lake_bytes  # rel -> bytes in the source, or None.

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def wait_in_lake(self, rel, data, timeout=60):
        """Write-back uploads follow the close; the others are there at once."""
        wait_until(lambda: self.lake_bytes(rel) == data, timeout, f"{rel} to reach the lake")


@pytest.fixture(scope="module", params=["folder-through", "folder-back", "s3-through"])
def target(request, module_harness, tmp_path_factory):
    kind, mode = request.param.split("-")
    s3 = None
    if kind == "s3":
        s3 = start_s3server(tmp_path_factory.mktemp("tools-s3"))
        up = module_harness.up(f"s3://{S3_BUCKET}/tools", name=f"up-tools-{request.param}",
                               s3=s3, extra=["--write-mode", mode])

        def lake_bytes(rel):
            return s3.object("tools/" + rel)
    else:
        src = tmp_path_factory.mktemp(f"tools-{mode}")
        up = module_harness.up("file://" + str(src), name=f"up-tools-{request.param}",
                               extra=["--write-mode", mode])

        def lake_bytes(rel):
            p = src / rel
            return p.read_bytes() if p.is_file() else None
    yield Target(request.param, up, lake_bytes)
    assert up.stop() == 0
    if s3:
        s3.proc.stop()


def make_tree(root):
    """A small tree with what archives hold: nested folders, an executable, a 3 MiB file, a
    name with spaces, an empty file."""
    rnd = random.Random(7)
    files = {
        "README.md": b"# a dataset\n",
        "bin/run.sh": b"#!/bin/sh\necho hi\n",
        "data/shard 0.bin": rnd.randbytes(3 * MiB + 5),
        "data/deep/er/x.json": b'{"k": 1}',
        "data/empty": b"",
    }
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    os.chmod(root / "bin/run.sh", 0o755)
    return files


def assert_same_tree(expected_root, got_root):
    compared = filecmp.dircmp(expected_root, got_root)
    stack = [compared]
    while stack:
        d = stack.pop()
        assert not d.left_only and not d.right_only, (d.left, d.left_only, d.right_only)
        _, mismatch, errors = filecmp.cmpfiles(d.left, d.right, d.common_files, shallow=False)
        assert not mismatch and not errors, (d.left, mismatch, errors)
        stack.extend(d.subdirs.values())


def test_cp_tar_and_rsync_copy_a_tree_byte_exact(target, tmp_path):
    tree = tmp_path / "tree"
    files = make_tree(tree)
    subprocess.run(["cp", "-r", str(tree), target.path("by-cp")], check=True)
    # An archive made by someone else (uid 1234): tar, as root, restores owners and modes, which
    # the mount accepts without effect.
    archive = tmp_path / "tree.tar"
    subprocess.run(["tar", "cf", str(archive), "--owner=1234", "--group=1234", "-C", str(tmp_path),
                    "tree"], check=True)
    os.mkdir(target.path("by-tar"))
    subprocess.run(["tar", "xf", str(archive), "-C", target.path("by-tar")], check=True)
    subprocess.run(["rsync", "-a", str(tree) + "/", target.path("by-rsync")], check=True)
    for copy in ("by-cp", "by-tar/tree", "by-rsync"):
        assert_same_tree(tree, target.path(copy))
    # A second rsync finds nothing to send the content of (sizes and times are what it checks:
    # the times are the source's, so it may send again, but the bytes stay the same).
    subprocess.run(["rsync", "-a", str(tree) + "/", target.path("by-rsync")], check=True)
    assert_same_tree(tree, target.path("by-rsync"))
    for rel, data in files.items():
        target.wait_in_lake("by-rsync/" + rel, data)
    # Mode changes are accepted without effect; setuid is not pretended.
    os.chmod(target.path("by-cp", "bin", "run.sh"), 0o700)
    assert os.stat(target.path("by-cp", "bin", "run.sh")).st_mode & 0o777 == 0o644
    with pytest.raises(OSError) as info:
        os.chmod(target.path("by-cp", "bin", "run.sh"), 0o4755)
    assert info.value.errno == errno.EPERM


def git(*args, cwd=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd or "/"))
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


def test_git_clone_into_the_mount_then_commit(target, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    rnd = random.Random(3)
    for i in range(3):
        (repo / f"f{i}.txt").write_bytes(rnd.randbytes(200_000).hex().encode())
        (repo / f"d{i}").mkdir()
        (repo / f"d{i}" / "x").write_text(str(i))
        git("add", "-A", cwd=repo)
        git("commit", "-q", "-m", f"c{i}", cwd=repo)
    clone = target.path("clone")
    # file:// makes git send a pack (a plain path would hard-link objects, which the mount
    # refuses): index-pack writes the pack and reads it back before closing it.
    git("clone", "-q", "file://" + str(repo), clone, cwd=tmp_path)
    git("fsck", "--full", "--strict", cwd=clone)
    assert git("status", "--porcelain", cwd=clone) == ""
    for i in range(3):
        assert open(os.path.join(clone, f"f{i}.txt"), "rb").read() == \
            (repo / f"f{i}.txt").read_bytes()
    with open(os.path.join(clone, "new.txt"), "w") as f:
        f.write("written in the mount\n")
    git("add", "new.txt", cwd=clone)
    git("commit", "-q", "-m", "in the mount", cwd=clone)
    assert git("log", "--format=%s", "-n", "2", cwd=clone).split() == \
        ["in", "the", "mount", "c2"]
    git("fsck", "--full", cwd=clone)
    target.wait_in_lake("clone/new.txt", b"written in the mount\n")


def test_a_file_reads_back_while_it_is_being_written(target):
    data = random.Random(5).randbytes(3 * MiB + 1234)
    path = target.path("being-written.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        # Through the same descriptor: a range that ends in a partly written page.
        assert os.pread(fd, 5000, len(data) - 3000) == data[-3000:]
        # Through another descriptor, opened by name while the first is open: what was written.
        with open(path, "rb") as reader:
            assert reader.read() == data
            extra = b"appended"
            os.write(fd, extra)
            reader.seek(len(data))
            assert reader.read() == extra
            os.close(fd)
            fd = -1
            # The writer is closed: the reader goes on with the committed object.
            reader.seek(0)
            assert reader.read() == data + extra
    finally:
        if fd >= 0:
            os.close(fd)
    with open(path, "rb") as f:
        assert f.read() == data + extra
    target.wait_in_lake("being-written.bin", data + extra)


def test_rename_over_a_file_is_atomic_for_a_reader_looping_on_it(target):
    """The checkpoint idiom (write `latest.tmp`, rename to `latest`) while another process reads
    `latest` in a loop: every read is one whole version, never a mix, a short file or ENOENT."""
    rounds = 12
    versions = []
    for i in range(rounds + 1):
        size = (2 * MiB + 17 * i) if i % 2 else (512 * 1024 + i)  # Sizes change every round.
        versions.append(bytes([i]) * 8 + random.Random(i).randbytes(size - 8))
    digests = {hashlib.sha256(v).hexdigest(): i for i, v in enumerate(versions)}
    final = target.path("latest.ckpt")
    with open(final, "wb") as f:
        f.write(versions[0])
    seen, problems = [], []
    stop = threading.Event()

    def read_loop():
        while not stop.is_set():
            try:
                with open(final, "rb") as f:
                    got = f.read()
            except OSError as e:
                problems.append(f"open/read: {e!r}")
                continue
            index = digests.get(hashlib.sha256(got).hexdigest())
            if index is None:
                problems.append(f"{len(got)} bytes that are no version (starts {got[:8]!r})")
            else:
                seen.append(index)

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        for i in range(1, rounds + 1):
            tmp = target.path(f"latest.ckpt.tmp{i}")
            with open(tmp, "wb") as f:
                f.write(versions[i])
            os.replace(tmp, final)
            time.sleep(0.05)
    finally:
        time.sleep(1.5)  # Past the kernel's attribute cache: the reader sees the last one.
        stop.set()
        reader.join()
    assert not problems, problems[:5]
    assert seen and seen[-1] == rounds, seen[-10:]
    # Versions only move forward for one reader (close-to-open, one process).
    assert all(a <= b for a, b in zip(seen, seen[1:])), seen
    target.wait_in_lake("latest.ckpt", versions[rounds])
    assert not [n for n in os.listdir(target.mnt) if n.startswith("latest.ckpt.tmp")]


def test_two_writers_of_one_path_the_last_to_close_wins(target):
    path = target.path("two-writers.txt")
    first = open(path, "wb")
    second = open(path, "wb")
    first.write(b"from the first writer\n")
    second.write(b"from the second writer, longer\n")
    second.close()
    first.close()  # The last to close: its bytes, whole.
    with open(path, "rb") as f:
        assert f.read() == b"from the first writer\n"
    target.wait_in_lake("two-writers.txt", b"from the first writer\n")
