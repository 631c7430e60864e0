"""The systems under test. Each exposes the dataset as files under `root` (or, for `direct`, as S3
keys) and can be (re)started with an empty cache.

  cairn   `cairn up s3://BUCKET MNT` (worker + FUSE mount in one process), fresh --cache-dir
  s3fs    s3fs with use_cache=DIR (its local file cache), fresh DIR
  rclone  rclone mount --vfs-cache-mode full, fresh --cache-dir
  direct  parallel GETs from the S3 endpoint with boto3 (no cache at all)
  local   a copy of the dataset on the local disk (the ceiling)
"""
import os
import shutil

from . import procs

ALL_SYSTEMS = ("cairn", "s3fs", "rclone", "direct", "local")
MOUNT_READY_TIMEOUT_S = 60


def write_s3fs_passwd(path, access_key, secret_key):
    """s3fs's passwd_file (it refuses one others can read)."""
    with open(path, "w") as f:
        f.write(f"{access_key}:{secret_key}\n")
    os.chmod(path, 0o600)


def write_rclone_config(path, endpoint, access_key, secret_key):
    """An rclone config whose remote `bench:` is the S3 endpoint (path-style buckets)."""
    with open(path, "w") as f:
        f.write("[bench]\ntype = s3\nprovider = Other\nenv_auth = false\n"
                f"access_key_id = {access_key}\nsecret_access_key = {secret_key}\n"
                f"endpoint = {endpoint}\nforce_path_style = true\nregion = us-east-1\n")


def rclone_env():
    env = dict(os.environ)
    env.pop("AWS_CA_BUNDLE", None)  # rclone's S3 backend refuses to start with it set.
    return env


class S3Env:
    """Where the shared bucket lives."""

    def __init__(self, endpoint, bucket, access_key="S3RVER", secret_key="S3RVER"):
        self.endpoint = endpoint
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key


class System:
    """Base: a name, an optional daemon, a root folder; start_fresh() empties its cache."""

    name = ""
    has_cache = True     # False: "warm" is not a separate state (direct, local).
    is_fs = True         # False: not a file system (direct GETs).

    def __init__(self, workdir):
        self.workdir = workdir
        self.daemon = None
        self.root = None
        self.starts = 0

    def start_fresh(self):
        """(Re)starts the system with an empty cache. Raises DaemonError on failure."""

    def stop(self):
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None

    def cpu_seconds(self):
        return self.daemon.cpu_seconds() if self.daemon is not None else None

    def metrics(self):
        """Counters from the system's own metrics endpoint, if it has one."""
        return {}

    def describe(self):
        """The daemon's argv (a list), or a sentence (a str) for systems without one."""
        return self.daemon.argv if self.daemon is not None else None

    def _fresh_dir(self, path):
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def _mount(self, name, argv, mnt, env=None, extra_ready=None):
        self.stop()
        os.makedirs(mnt, exist_ok=True)
        if procs.is_mounted(mnt):
            procs.lazy_unmount(mnt)
        self.starts += 1
        log = os.path.join(self.workdir, "logs", f"{name}-{self.starts}.log")
        self.daemon = procs.Daemon(name, argv, log, env=env, mountpoint=mnt).start()

        def ready():
            if not procs.is_mounted(mnt):
                return False
            if extra_ready is not None and not extra_ready():
                return False
            # The dataset's folders must be visible through the mount.
            return os.path.isdir(os.path.join(mnt, "small"))

        self.daemon.wait_ready(ready, MOUNT_READY_TIMEOUT_S, "mounted")
        self.root = mnt


class CairnSystem(System):
    name = "cairn"

    def __init__(self, workdir, s3, binary, cache_size, extra_args=()):
        super().__init__(workdir)
        self.s3 = s3
        self.binary = binary
        self.cache_size = cache_size
        self.extra_args = list(extra_args)
        self.metrics_port = None

    def start_fresh(self):
        cache = self._fresh_dir(os.path.join(self.workdir, "cache-cairn"))
        mnt = os.path.join(self.workdir, "mnt-cairn")
        self.metrics_port = procs.free_port()
        argv = [self.binary, "up", f"s3://{self.s3.bucket}", mnt, "--cache-dir", cache,
                "--cache-size", self.cache_size,
                "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                "--endpoint", self.s3.endpoint, "--access-key", self.s3.access_key,
                "--secret-key", self.s3.secret_key] + self.extra_args
        url = f"http://127.0.0.1:{self.metrics_port}/healthz"
        self._mount("cairn", argv, mnt, extra_ready=lambda: procs.http_get(url)[0] == 200)

    def metrics(self):
        if self.metrics_port is None:
            return {}
        status, body = procs.http_get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)
        if status != 200:
            return {}
        return parse_prometheus(body.decode("utf-8", "replace"))


def parse_prometheus(text):
    """Sums every sample of each metric family over its labels: {name: value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            name_labels, value = line.rsplit(None, 1)
            value = float(value)
        except ValueError:
            continue
        name = name_labels.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + value
    return out


class S3fsSystem(System):
    name = "s3fs"

    def __init__(self, workdir, s3):
        super().__init__(workdir)
        self.s3 = s3

    def start_fresh(self):
        cache = self._fresh_dir(os.path.join(self.workdir, "cache-s3fs"))
        mnt = os.path.join(self.workdir, "mnt-s3fs")
        passwd = os.path.join(self.workdir, "s3fs.passwd")
        write_s3fs_passwd(passwd, self.s3.access_key, self.s3.secret_key)
        opts = (f"url={self.s3.endpoint},use_path_request_style,use_cache={cache},"
                f"passwd_file={passwd},ro")
        self._mount("s3fs", ["s3fs", self.s3.bucket, mnt, "-f", "-o", opts], mnt)


class RcloneSystem(System):
    name = "rclone"

    def __init__(self, workdir, s3):
        super().__init__(workdir)
        self.s3 = s3

    def start_fresh(self):
        cache = self._fresh_dir(os.path.join(self.workdir, "cache-rclone"))
        mnt = os.path.join(self.workdir, "mnt-rclone")
        conf = os.path.join(self.workdir, "rclone.conf")
        write_rclone_config(conf, self.s3.endpoint, self.s3.access_key, self.s3.secret_key)
        env = rclone_env()
        argv = ["rclone", "--config", conf, "mount", f"bench:{self.s3.bucket}", mnt,
                "--vfs-cache-mode", "full", "--cache-dir", cache, "--read-only"]
        self._mount("rclone", argv, mnt, env=env)


class DirectSystem(System):
    name = "direct"
    has_cache = False
    is_fs = False

    def __init__(self, workdir, s3, client, max_connections):
        super().__init__(workdir)
        self.s3 = s3
        self.client = client  # "curl" (native, default) or "boto3".
        self.max_connections = max_connections
        self.reader = None

    def start_fresh(self):
        if self.client == "boto3" and self.reader is None:
            from .workloads import S3Reader
            self.reader = S3Reader(self.s3.endpoint, self.s3.bucket, self.s3.access_key,
                                   self.s3.secret_key, self.max_connections)

    def epoch(self, keys, sizes, readers):
        from . import workloads
        if self.client == "boto3":
            return workloads.s3_epoch(self.reader, keys, sizes, readers)
        return workloads.curl_epoch(self.s3.endpoint, self.s3.bucket, self.s3.access_key,
                                    self.s3.secret_key, keys, sizes, readers,
                                    os.path.join(self.workdir, "curl-urls.cfg"))

    def describe(self):
        if self.client == "boto3":
            return f"boto3 GetObject, path-style, {self.s3.endpoint}, one connection per reader"
        return ("curl --aws-sigv4 over a --config URL list; 1 reader: one kept-alive connection;"
                " N readers: --parallel --parallel-max N --parallel-immediate")


class LocalSystem(System):
    name = "local"
    has_cache = False

    def __init__(self, workdir, data_dir):
        super().__init__(workdir)
        self.root = data_dir

    def describe(self):
        return f"plain files in {self.root}"
