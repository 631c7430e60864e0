"""Every kind of write on the mount fails with EROFS; the daemon survives and keeps serving,
and the source is never modified."""

import errno
import os
import subprocess

import pytest

from conftest import read_file, tree_files


@pytest.fixture(scope="module")
def ro_mount(module_harness, tmp_path_factory):
    src = tmp_path_factory.mktemp("ro-src")
    (src / "file.bin").write_bytes(os.urandom(100_000))
    (src / "dir").mkdir()
    (src / "dir" / "inner.txt").write_bytes(b"inner")
    before = {rel: read_file(src / rel) for rel in tree_files(src)}
    up = module_harness.up("file://" + str(src), name="up-ro")
    yield up, src
    after = {rel: read_file(src / rel) for rel in tree_files(src)}
    assert after == before, "the source changed"
    assert up.stop() == 0


def _erofs(fn, *args):
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == errno.EROFS, f"{fn.__name__}{args}: {info.value!r}"


OPS = {
    "open-w-new": lambda m: open(os.path.join(m, "new.txt"), "wb"),
    "open-w-existing": lambda m: open(os.path.join(m, "file.bin"), "wb"),
    "open-append": lambda m: open(os.path.join(m, "file.bin"), "ab"),
    "open-rdwr": lambda m: os.open(os.path.join(m, "file.bin"), os.O_RDWR),
    "open-trunc": lambda m: os.open(os.path.join(m, "file.bin"), os.O_RDONLY | os.O_TRUNC),
    "mkdir": lambda m: os.mkdir(os.path.join(m, "newdir")),
    "rmdir": lambda m: os.rmdir(os.path.join(m, "dir")),
    "unlink": lambda m: os.unlink(os.path.join(m, "file.bin")),
    "rename": lambda m: os.rename(os.path.join(m, "file.bin"), os.path.join(m, "moved.bin")),
    "symlink": lambda m: os.symlink("file.bin", os.path.join(m, "link")),
    "link": lambda m: os.link(os.path.join(m, "file.bin"), os.path.join(m, "hard")),
    "chmod": lambda m: os.chmod(os.path.join(m, "file.bin"), 0o666),
    "utime": lambda m: os.utime(os.path.join(m, "file.bin")),
    "truncate": lambda m: os.truncate(os.path.join(m, "file.bin"), 0),
    "mknod-fifo": lambda m: os.mkfifo(os.path.join(m, "fifo")),
    "setxattr": lambda m: os.setxattr(os.path.join(m, "file.bin"), "user.x", b"1"),
}


@pytest.mark.parametrize("op", list(OPS))
def test_write_calls_get_erofs(ro_mount, op):
    up, src = ro_mount
    _erofs(OPS[op], up.mountpoint)
    assert up.alive()
    assert read_file(os.path.join(up.mountpoint, "file.bin")) == (src / "file.bin").read_bytes()


@pytest.mark.parametrize("cmd", [["touch", "{m}/new.txt"], ["touch", "{m}/file.bin"],
                                 ["rm", "-f", "{m}/file.bin"], ["rm", "-rf", "{m}/dir"],
                                 ["mkdir", "{m}/d2"], ["cp", "/etc/hostname", "{m}/"],
                                 ["sh", "-c", "echo x >> {m}/file.bin"]],
                         ids=["touch-new", "touch-existing", "rm", "rm-rf", "mkdir", "cp-into",
                              "shell-append"])
def test_shell_writes_fail_with_read_only_message(ro_mount, cmd):
    up, src = ro_mount
    args = [a.replace("{m}", up.mountpoint) for a in cmd]
    out = subprocess.run(args, capture_output=True, timeout=30, env=dict(os.environ, LC_ALL="C"))
    assert out.returncode != 0
    assert b"Read-only file system" in out.stderr, out.stderr
    assert up.alive()
    assert sorted(os.listdir(up.mountpoint)) == ["dir", "file.bin"]
    assert read_file(os.path.join(up.mountpoint, "dir", "inner.txt")) == b"inner"
