"""Fixtures and helpers for Cairn's multi-process integration tests.

Everything a test starts (s3rver, `cairn worker`, `cairn fuse`, `cairn up`) runs as a child
process in its own process group with its output in a log file. Teardown always stops every
child by PID (SIGTERM, then SIGKILL of its group) and lazily unmounts every mount point, even
when the test failed; the last lines of each child's log are attached to a failed test's report.

Run (Debian's interpreter: it has boto3, torch and pytest):
    /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/ --cairn-bin=build/cairn
"""

import hashlib
import http.client
import os
import random
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

MiB = 1 << 20
KiB = 1 << 10
PAGE = MiB  # Cairn's default page size.

REPO = Path(__file__).resolve().parent.parent
S3RVER_JS = REPO / "node_modules" / "s3rver" / "bin" / "s3rver.js"
S3_KEY = "S3RVER"
S3_SECRET = "S3RVER"
S3_BUCKET = "cairn-it"
S3_PREFIX = "data"  # The shared dataset lives under s3://cairn-it/data/.

# Readiness and shutdown deadlines (seconds). Generous: two cores are shared with builds.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0


def pytest_addoption(parser):
    parser.addoption("--cairn-bin", action="store", default=str(REPO / "build" / "cairn"),
                     help="path of the cairn binary under test")


@pytest.fixture(scope="session")
def cairn_bin(request):
    path = Path(request.config.getoption("--cairn-bin")).resolve()
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.exit(f"--cairn-bin {path} is not an executable file", returncode=2)
    return str(path)


@pytest.fixture(scope="session")
def cairn(cairn_bin):
    """The SDK as built next to the binary (build/python)."""
    sdk = Path(cairn_bin).resolve().parent / "python"
    assert (sdk / "cairn" / "__init__.py").is_file(), f"the Python SDK is not built in {sdk}"
    sys.path.insert(0, str(sdk))
    import cairn as module
    assert Path(module.__file__).resolve().parent == (sdk / "cairn").resolve()
    return module


@pytest.fixture(scope="session", autouse=True)
def _require_fuse():
    # Without /dev/fuse nothing here can run; fail loudly instead of skipping silently.
    if not os.path.exists("/dev/fuse"):
        pytest.exit("/dev/fuse is missing: these tests need FUSE (root or --device /dev/fuse)",
                    returncode=2)


# ------------------------------------------------------------------------------------------
# Small utilities
# ------------------------------------------------------------------------------------------

_PORTS_GIVEN = set()


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1, and not given out by this function
    before in this process: the kernel may hand the port it just freed to the next bind, so two
    calls in a row (a worker's page port and metrics port) could name the same one (a CI run
    failed so: "cannot listen on ...: Address already in use")."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            if len(_PORTS_GIVEN) > 16384:
                _PORTS_GIVEN.clear()
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no free port that was not given out before")


def wait_until(predicate, timeout, what, interval=0.02):
    """Polls `predicate` until it returns a truthy value or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _unescape_mount_field(field):
    # /proc/self/mounts escapes space, tab, newline and backslash as octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts():
    """(mount point, fs type) pairs of /proc/self/mounts."""
    result = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                result.append((_unescape_mount_field(parts[1]), parts[2]))
    return result


def is_mounted(path):
    path = os.path.realpath(path)
    return any(mp == path for mp, _ in mounts())


def cairn_mount_type(path):
    path = os.path.realpath(path)
    for mp, fstype in mounts():
        if mp == path:
            return fstype
    return None


def unmount(path):
    """Lazily unmounts `path` if it is mounted (FUSE's helper first, then umount -l)."""
    for cmd in (["fusermount3", "-u", "-z", path], ["umount", "-l", path]):
        if not is_mounted(path):
            return
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)


def http_get(port, path, timeout=2.0, tls=None):
    """(status, body) of GET http://127.0.0.1:port/path, or https:// with `tls` = (CA file,
    client certificate file or None, its key file or None)."""
    if tls:
        ca, cert, key = tls
        context = ssl.create_default_context(cafile=str(ca))
        if cert:
            context.load_cert_chain(str(cert), str(key))
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def metrics_tls_of(args):
    """A worker started with `args` serves https /metrics when it has TLS (and no
    --metrics-insecure-plaintext): (CA, its own certificate and key to scrape with)."""
    def flag(name):
        return args[args.index(name) + 1] if name in args else None
    if flag("--tls-ca") is None or "--metrics-insecure-plaintext" in args:
        return None
    return (flag("--tls-ca"), flag("--tls-cert"), flag("--tls-key"))


def parse_metrics(text):
    """Prometheus text -> {series: value}, and each family's sum under its bare name."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        series[name_labels] = float(value)
    totals = {}
    for key, value in series.items():
        bare = key.split("{", 1)[0]
        if "{" in key:
            totals[bare] = totals.get(bare, 0.0) + value
    for bare, value in totals.items():
        series.setdefault(bare, value)
    return series


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def read_whole(path, direct=False, chunk=MiB):
    """A whole file read with pread in `chunk`-sized calls; with O_DIRECT when `direct`, so
    every byte comes through the FUSE daemon instead of the kernel's page cache."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        parts, off = [], 0
        while True:
            b = os.pread(fd, chunk, off)
            if not b:
                return b"".join(parts)
            parts.append(b)
            off += len(b)
    finally:
        os.close(fd)


def tree_files(root):
    """{relative path: size} of every regular file under `root`."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root)] = os.stat(full).st_size
    return out


# ------------------------------------------------------------------------------------------
# Child processes
# ------------------------------------------------------------------------------------------

class Proc:
    """One child process in its own process group, output captured to a log file."""

    def __init__(self, name, args, log_dir, env=None):
        self.name = name
        self.args = [str(a) for a in args]
        self.log_path = Path(log_dir) / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self._log.write(f"$ {' '.join(self.args)}\n".encode())
        self._log.flush()
        self.popen = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      env=env)
        self.pid = self.popen.pid
        self.mountpoint = None
        self.metrics_port = None
        self.metrics_tls = None  # (CA, cert, key) when /metrics is https (a TLS worker's).
        self.listen_port = None

    def alive(self):
        return self.popen.poll() is None

    @property
    def returncode(self):
        return self.popen.poll()

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"<cannot read {self.log_path}: {e}>"

    def log_tail(self, lines=60):
        return "\n".join(self.log_text().splitlines()[-lines:])

    def send_signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def kill9(self):
        """SIGKILL, as a crash would; waits until it is reaped."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=STOP_TIMEOUT)

    def wait(self, timeout=STOP_TIMEOUT):
        return self.popen.wait(timeout=timeout)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Sends `sig`, waits; escalates to SIGKILL of the group. Returns the exit code."""
        if self.alive():
            try:
                os.kill(self.pid, sig)
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # Still unreaped, so its PID (= process group id) cannot have been reused.
                self._killgroup()
        rc = self.popen.wait(timeout=timeout)
        self._log.close()
        return rc

    def _killgroup(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)  # Our own group: pgid == pid.
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass

    def metrics(self):
        """Parsed /metrics of this process (needs metrics_port)."""
        assert self.metrics_port, f"{self.name} has no metrics port"
        status, body = http_get(self.metrics_port, "/metrics", tls=self.metrics_tls)
        assert status == 200, f"/metrics of {self.name} answered {status}: {body[:200]}"
        return parse_metrics(body)

    def metric(self, name):
        return self.metrics().get(name, 0.0)


_ACTIVE_HARNESSES = []


class Harness:
    """Starts cairn processes, remembers them and their mount points, and cleans all up."""

    def __init__(self, cairn_bin, workdir):
        self.cairn_bin = cairn_bin
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(exist_ok=True)
        self.procs = []
        self.mountpoints = []
        self._n = 0
        _ACTIVE_HARNESSES.append(self)

    # -- generic -----------------------------------------------------------------------
    def spawn(self, name, args, env=None):
        self._n += 1
        p = Proc(f"{self._n:02d}-{name}", args, self.log_dir, env=env)
        self.procs.append(p)
        return p

    def new_mountpoint(self, name="mnt"):
        self._n += 1
        mp = self.workdir / f"{name}{self._n}"
        mp.mkdir(parents=True)
        self.mountpoints.append(str(mp))
        return str(mp)

    def new_dir(self, name):
        self._n += 1
        d = self.workdir / f"{name}{self._n}"
        d.mkdir(parents=True)
        return str(d)

    def _check_alive(self, proc, what):
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited with {proc.returncode} before {what}:\n"
                                 f"{proc.log_tail()}")

    def wait_mounted(self, proc, mountpoint, timeout=START_TIMEOUT):
        def ready():
            self._check_alive(proc, f"mounting {mountpoint}")
            return cairn_mount_type(mountpoint) == "fuse.cairn"
        wait_until(ready, timeout, f"{proc.name} to mount {mountpoint}")

    def wait_healthy(self, proc, timeout=START_TIMEOUT):
        def ready():
            self._check_alive(proc, "answering /healthz")
            try:
                status, _ = http_get(proc.metrics_port, "/healthz", timeout=1.0,
                                     tls=proc.metrics_tls)
                return status == 200
            except OSError:
                return False
        wait_until(ready, timeout, f"{proc.name} /healthz on port {proc.metrics_port}")

    def wait_listening(self, proc, port, timeout=START_TIMEOUT):
        def ready():
            self._check_alive(proc, f"listening on {port}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return True
            except OSError:
                return False
        wait_until(ready, timeout, f"{proc.name} to listen on port {port}")

    # -- cairn roles --------------------------------------------------------------------
    def up(self, source, mountpoint=None, cache_dir=None, cache_size="256MiB", metrics=True,
           extra=(), s3=None, name="up"):
        """Starts `cairn up SOURCE MOUNTPOINT` and waits for the mount (and /healthz)."""
        mountpoint = mountpoint or self.new_mountpoint()
        cache_dir = cache_dir or str(self.workdir / f"cache{self._n + 1}")
        args = [self.cairn_bin, "up", source, mountpoint, "--cache-dir", cache_dir,
                "--cache-size", cache_size]
        port = None
        if metrics:
            port = free_port()
            args += ["--metrics-listen", f"127.0.0.1:{port}"]
        if s3:
            args += s3.flags()
        args += list(extra)
        p = self.spawn(name, args)
        p.mountpoint, p.metrics_port, p.cache_dir = mountpoint, port, cache_dir
        if mountpoint not in self.mountpoints:
            self.mountpoints.append(mountpoint)
        self.wait_mounted(p, mountpoint)
        if metrics:
            self.wait_healthy(p)
        return p

    def worker(self, mounts, cache_dir, cache_size="256MiB", listen_port=None,
               metrics_port=None, extra=(), s3=None, name="worker", env=None):
        """Starts `cairn worker` and waits until its page port and /healthz answer."""
        listen_port = listen_port or free_port()
        metrics_port = metrics_port or free_port()
        args = [self.cairn_bin, "worker", "--cache-dir", cache_dir, "--cache-size", cache_size,
                "--listen", f"127.0.0.1:{listen_port}",
                "--metrics-listen", f"127.0.0.1:{metrics_port}", "--id", name]
        for m in mounts:
            args += ["--mount", m]
        if s3:
            args += s3.flags()
        args += list(extra)
        p = self.spawn(name, args, env=env)
        p.listen_port, p.metrics_port, p.cache_dir = listen_port, metrics_port, cache_dir
        p.metrics_tls = metrics_tls_of(args)
        p.mounts = list(mounts)
        self.wait_listening(p, listen_port)
        self.wait_healthy(p)
        return p

    def fuse(self, mounts, workers=(), mountpoint=None, extra=(), s3=None, name="fuse",
             env=None):
        """Starts `cairn fuse MOUNTPOINT --mount ... --worker ...` and waits for the mount."""
        mountpoint = mountpoint or self.new_mountpoint()
        args = [self.cairn_bin, "fuse", mountpoint]
        for m in mounts:
            args += ["--mount", m]
        for w in workers:
            args += ["--worker", w]
        if s3:
            args += s3.flags()
        args += list(extra)
        p = self.spawn(name, args, env=env)
        p.mountpoint = mountpoint
        if mountpoint not in self.mountpoints:
            self.mountpoints.append(mountpoint)
        self.wait_mounted(p, mountpoint)
        return p

    def run(self, args, timeout=30, **kw):
        """Runs a short cairn command to completion (stdout/stderr captured; stdin empty
        unless `input` gives it)."""
        if "input" not in kw:
            kw["stdin"] = subprocess.DEVNULL
        return subprocess.run([self.cairn_bin] + [str(a) for a in args], capture_output=True,
                              timeout=timeout, **kw)

    # -- teardown -------------------------------------------------------------------------
    def cleanup(self):
        errors = []
        for p in reversed(self.procs):
            try:
                p.stop()
            except Exception as e:  # Keep cleaning the others.
                errors.append(f"{p.name}: {e}")
        for mp in self.mountpoints:
            try:
                unmount(mp)
            except Exception as e:
                errors.append(f"unmount {mp}: {e}")
        if self in _ACTIVE_HARNESSES:
            _ACTIVE_HARNESSES.remove(self)
        left = [mp for mp in self.mountpoints if is_mounted(mp)]
        if left:
            errors.append(f"still mounted after cleanup: {left}")
        return errors


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for h in list(_ACTIVE_HARNESSES):
            for p in h.procs:
                report.sections.append((f"log of {p.name} (pid {p.pid})", p.log_tail(80)))


def _make_harness(cairn_bin, tmp_root):
    return Harness(cairn_bin, tmp_root)


@pytest.fixture
def harness(cairn_bin, tmp_path):
    h = _make_harness(cairn_bin, tmp_path / "h")
    yield h
    errors = h.cleanup()
    assert not errors, f"cleanup problems: {errors}"


# ------------------------------------------------------------------------------------------
# s3rver
# ------------------------------------------------------------------------------------------

class S3Server:
    def __init__(self, port, proc):
        self.port = port
        self.proc = proc
        self.endpoint = f"http://127.0.0.1:{port}"
        import boto3
        from botocore.config import Config
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3},
                          max_pool_connections=16))

    def flags(self):
        return ["--endpoint", self.endpoint, "--region", "us-east-1", "--access-key", S3_KEY,
                "--secret-key", S3_SECRET]

    def put(self, key, data):
        self.client.put_object(Bucket=S3_BUCKET, Key=key, Body=data)

    def object(self, key):
        """The bytes of `key` in the bucket, or None if there is no such object."""
        import botocore.exceptions
        try:
            return self.client.get_object(Bucket=S3_BUCKET, Key=key)["Body"].read()
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise

    def upload_tree(self, root, prefix, threads=8):
        items = []
        for dirpath, _, files in os.walk(root):
            for name in files:
                full = os.path.join(dirpath, name)
                items.append((full, prefix + "/" + os.path.relpath(full, root)))

        def one(item):
            self.put(item[1], read_file(item[0]))
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, items))
        return len(items)


def start_s3server(root, port=None):
    """Starts s3rver with its data under `root` (a folder that exists) and bucket S3_BUCKET,
    on `port` (default: a free one); returns the S3Server once it answers. The caller stops
    `server.proc`."""
    data = Path(root) / "data"
    data.mkdir(exist_ok=True)
    port = port or free_port()
    env = dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider")
    proc = Proc("s3rver", ["node", S3RVER_JS, "-d", data, "-a", "127.0.0.1", "-p", port, "-s",
                           "--no-vhost-buckets"], root, env=env)

    def ready():
        if not proc.alive():
            raise AssertionError(f"s3rver exited: {proc.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return True
        except OSError:
            return False
    try:
        wait_until(ready, START_TIMEOUT, "s3rver")
        server = S3Server(port, proc)
        if not (data / S3_BUCKET).exists():
            server.client.create_bucket(Bucket=S3_BUCKET)
    except BaseException:
        proc.stop()
        raise
    return server


@pytest.fixture(scope="session")
def s3server(tmp_path_factory):
    if not S3RVER_JS.is_file():
        pytest.exit(f"{S3RVER_JS} missing: run `npm install` in {REPO}", returncode=2)
    server = start_s3server(tmp_path_factory.mktemp("s3rver"))
    yield server
    server.proc.stop()


# ------------------------------------------------------------------------------------------
# The shared dataset (a local folder; the same bytes are uploaded to s3rver on demand)
# ------------------------------------------------------------------------------------------

MANY_COUNT = 10_000
TRAIN_COUNT = 96
TRAIN_SAMPLE = 32 * KiB
UNICODE_NAME = "ünïcödé 日本語 ✓.bin"
SPACE_NAME = "name with spaces.txt"

# name -> size of the files at the top of the dataset (page size 1 MiB).
SIZED_FILES = {
    "empty.bin": 0,
    "one.bin": 1,
    "page1.bin": 1 * MiB,
    "page3.bin": 3 * MiB,
    "odd-4095.bin": 4095,
    "odd-65537.bin": 65537,
    "page-minus-1.bin": MiB - 1,
    "page-plus-1.bin": MiB + 1,
    "odd-big.bin": 5 * MiB + 12345,
    SPACE_NAME: 3000,
    UNICODE_NAME: 2 * MiB + 77,
    "dir one/sub dir/deep file.bin": 1500 * KiB,
    "dir one/x.txt": 10,
}


class Dataset:
    def __init__(self, root):
        self.root = Path(root)

    def path(self, rel):
        return self.root / rel

    def bytes(self, rel):
        return read_file(self.root / rel)

    def files(self):
        return tree_files(self.root)

    def many_names(self):
        return [many_name(i) for i in range(MANY_COUNT)]


def many_name(i):
    return f"f{i:05d}.txt"


def write_dataset(root):
    rng = random.Random(20240611)
    root = Path(root)
    for rel, size in SIZED_FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.randbytes(size))
    many = root / "many"
    many.mkdir()
    for i in range(MANY_COUNT):
        # Small and distinct: each file names itself, so a mixed-up file is caught.
        (many / many_name(i)).write_bytes(f"{i}:".encode() + rng.randbytes(rng.randrange(1, 80)))
    train = root / "train"
    train.mkdir()
    for i in range(TRAIN_COUNT):
        (train / f"s{i:03d}.bin").write_bytes(rng.randbytes(TRAIN_SAMPLE))


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("dataset") / "src"
    root.mkdir()
    write_dataset(root)
    return Dataset(root)


@pytest.fixture(scope="session")
def s3_dataset(s3server, dataset):
    """The dataset uploaded to s3://cairn-it/data/ (once per session)."""
    s3server.upload_tree(dataset.root, S3_PREFIX)
    return dataset


@pytest.fixture(scope="module")
def module_harness(cairn_bin, tmp_path_factory):
    h = _make_harness(cairn_bin, tmp_path_factory.mktemp("mh"))
    yield h
    errors = h.cleanup()
    assert not errors, f"cleanup problems: {errors}"


# ------------------------------------------------------------------------------------------
# Page files (docs/pagestore.md, format version 2; version 1 is read the same way)
# ------------------------------------------------------------------------------------------

class PageFile:
    def __init__(self, path):
        self.path = Path(path)
        with open(path, "rb") as f:
            head = f.read(64)
            (magic, version, fixed, header_len, data_offset, data_length, chunk_size,
             chunk_count, key_length, flags, page_index) = struct.unpack_from(
                 "<8sHHIIIIIIIQ", head, 0)
            if magic != b"CAIRNPAG" or version not in (1, 2):
                raise ValueError(f"{path} is not a page file of format 1 or 2")
            f.seek(64)
            key = f.read(key_length)
        self.data_offset = data_offset
        self.data_length = data_length
        self.page_index = page_index
        parts = key.split(b"\0")
        self.object_id = parts[0].decode("utf-8", "replace")
        self.version = parts[1].decode("utf-8", "replace") if len(parts) > 1 else ""


def page_files(cache_dir):
    """Every finished page file under `cache_dir` (temp files excluded), parsed."""
    out = []
    v1 = Path(cache_dir) / "v1"
    for sub in sorted(v1.iterdir()):
        for f in sorted(sub.iterdir()):
            if len(f.name) == 32 and "." not in f.name:
                out.append(PageFile(f))
    return out
