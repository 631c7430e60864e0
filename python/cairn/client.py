"""The Python face of libcairn's client: `connect()` and `Client`.

Errors are OSError subclasses chosen by errno (FileNotFoundError, PermissionError,
FileExistsError, IsADirectoryError, NotADirectoryError, TimeoutError, OSError(EIO), ...);
bad arguments are ValueError or TypeError; a closed client raises ValueError, as a closed file
does. Blocking calls release the GIL.

fork(): a client (and every file opened from it) keeps working in a forked child (PyTorch
DataLoader workers): the child gets a fresh connection set on first use and never touches the
parent's threads or sockets. A file opened before the fork is reopened in the child at the
same version; if the object changed since, its next read raises OSError(ESTALE). The child's
client starts with what the parent's had cached of the namespace (stats and listing pages,
until their TTL): a DataLoader worker does not list again the folder its dataset listed.
"""

import dataclasses
import errno
import json
import os
import posixpath
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from . import _cairn
from .io import open_file

__all__ = ["Client", "FileInfo", "connect"]


@dataclasses.dataclass(frozen=True)
class FileInfo:
    """What `Client.stat` and `Client.ls(detail=True)` return."""

    path: str
    size: int
    version: str
    mtime_ns: int
    is_dir: bool

    @property
    def name(self):
        return posixpath.basename(self.path) if self.path != "/" else ""

    @property
    def mtime(self):
        """Modification time in seconds since the epoch (float)."""
        return self.mtime_ns / 1e9

    @staticmethod
    def _of(path, d):
        return FileInfo(path=path, size=d["size"], version=d["version"],
                        mtime_ns=d["mtime_ns"], is_dir=d["is_dir"])


def _normalize(path):
    """A namespace path: absolute, no '.'/'..' games, no trailing slash (except '/')."""
    if not isinstance(path, str):
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
    if not path.startswith("/"):
        raise ValueError(f"cairn paths are absolute ('/<mount>/...'), not {path!r}")
    if "\0" in path:
        raise ValueError("a cairn path cannot contain NUL")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"'..' is not allowed in a cairn path: {path!r}")
    return "/" + "/".join(parts)


def _env(name):
    value = os.environ.get(name)
    return value if value else None


def _read_json(path):
    with open(path, "rb") as f:
        text = f.read(4 << 20)
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"cairn.connect: config file {path}: {e}") from None


def _mount_entries(mounts):
    """`mounts` as config-file entries: {"/lake": "s3://b/p"} or {"/lake": {"uri": ...}}, or a
    list of config-file mount objects."""
    if isinstance(mounts, dict):
        out = []
        for path, spec in mounts.items():
            if isinstance(spec, str):
                out.append({"path": path, "uri": spec})
            elif isinstance(spec, dict):
                out.append(dict(spec, path=path))
            else:
                raise TypeError(f"mounts[{path!r}] must be a URI or a dict")
        return out
    if isinstance(mounts, (list, tuple)):
        return [dict(m) for m in mounts]
    raise TypeError("mounts must be a dict {path: uri} or a list of mount objects")


def _etcd_urls(etcd):
    if isinstance(etcd, (list, tuple)):
        etcd = ",".join(etcd)
    urls = []
    for one in etcd.split(","):
        one = one.strip()
        if not one:
            continue
        if "://" not in one:
            one = "http://" + one
        urls.append(one)
    if not urls:
        raise ValueError("cairn.connect: etcd: no endpoint given")
    return ",".join(urls)


def _set_files(doc, section, **fields):
    """doc[section][field] = the argument, else its environment variable, for each
    field=(argument, variable) given either way; the config's own values stay otherwise."""
    values = dict(doc.get(section, {}))
    for field, (value, env) in fields.items():
        value = value if value is not None else _env(env)
        if value is not None:
            values[field] = os.fspath(value)
    if values:
        doc[section] = values


def _settings(config=None, etcd=None, workers=None, mounts=None, tls_ca=None, tls_cert=None,
              tls_key=None, token=None, token_file=None, etcd_ca=None, etcd_cert=None,
              etcd_key=None, etcd_insecure_plaintext=None, metadata_via_workers=None,
              page_size=None, worker_timeout=None, short_circuit=True, no_cache=False,
              buffer_size=None):
    """The config document and the extra options of a client (see `connect`)."""
    config = config if config is not None else _env("CAIRN_CONFIG")
    if config is None:
        doc = {}
    elif isinstance(config, dict):
        doc = json.loads(json.dumps(config))  # A deep copy of plain JSON values.
    else:
        doc = _read_json(os.fspath(config))
    if not isinstance(doc, dict):
        raise ValueError("cairn.connect: a config must be a JSON object")
    # A worker section configures a worker process, not a client.
    doc.pop("worker", None)
    if mounts is not None:
        doc["mounts"] = list(doc.get("mounts", [])) + _mount_entries(mounts)
    if workers is not None:
        if isinstance(workers, str):
            workers = [workers]
        doc["workers"] = list(doc.get("workers", [])) + list(workers)
    etcd = etcd if etcd is not None else (None if doc.get("mounts") else _env("CAIRN_ETCD"))
    if etcd is not None:
        doc["etcd"] = _etcd_urls(etcd)
    if "etcd" in doc and (doc.get("mounts") or doc.get("workers")):
        raise ValueError("cairn.connect: with etcd, mounts and workers come from etcd; do not "
                         "also give mounts or workers")
    if not doc.get("mounts") and "etcd" not in doc:
        raise ValueError("cairn.connect: no mounts: give etcd=..., mounts=..., config=..., or "
                         "set CAIRN_ETCD or CAIRN_CONFIG")
    _set_files(doc, "tls", ca_file=(tls_ca, "CAIRN_TLS_CA"), cert_file=(tls_cert, "CAIRN_TLS_CERT"),
               key_file=(tls_key, "CAIRN_TLS_KEY"))
    _set_files(doc, "etcd_tls", ca_file=(etcd_ca, "CAIRN_ETCD_CA"),
               cert_file=(etcd_cert, "CAIRN_ETCD_CERT"), key_file=(etcd_key, "CAIRN_ETCD_KEY"))
    plaintext = (etcd_insecure_plaintext if etcd_insecure_plaintext is not None
                 else _env("CAIRN_ETCD_INSECURE_PLAINTEXT"))
    if plaintext is not None:
        doc["etcd_insecure_plaintext"] = plaintext
    if metadata_via_workers is not None:
        doc["metadata_via_workers"] = bool(metadata_via_workers)
    if page_size is not None:
        doc["page_size"] = page_size
    if worker_timeout is not None:
        doc["worker_timeout"] = (f"{worker_timeout * 1000:.0f}ms"
                                 if isinstance(worker_timeout, (int, float)) else worker_timeout)
    if token is not None and token_file is not None:
        raise ValueError("cairn.connect: give token or token_file, not both")
    if token is None and token_file is None:
        token, token_file = _env("CAIRN_TOKEN"), _env("CAIRN_TOKEN_FILE")
    if token_file is not None:
        with open(token_file, "rb") as f:
            token = f.read(64 << 10).decode("ascii", "replace").strip()
        if not token:
            raise ValueError(f"cairn.connect: token file {token_file} is empty")
    if buffer_size is not None and (not isinstance(buffer_size, int) or buffer_size < 1):
        raise ValueError("cairn.connect: buffer_size must be a positive number of bytes")
    return {"config": doc, "token": token or "", "short_circuit": bool(short_circuit),
            "no_cache": bool(no_cache), "buffer_bytes": buffer_size or 0}


def connect(etcd=None, *, workers=None, mounts=None, config=None, tls_ca=None, tls_cert=None,
            tls_key=None, token=None, token_file=None, etcd_ca=None, etcd_cert=None,
            etcd_key=None, etcd_insecure_plaintext=None, metadata_via_workers=None,
            page_size=None, worker_timeout=None, short_circuit=True, no_cache=False,
            buffer_size=None):
    """Connects to a Cairn cluster or to a set of workers.

    etcd: cluster mode: etcd endpoints ("https://etcd-1:2379,https://etcd-2:2379" or a list);
        the workers and the mount table come from etcd and follow its changes.
    workers, mounts: without etcd: "host:port" of the cache workers (for one node started with
        `cairn up --listen` or `cairn worker`) and the mount table, {"/lake": "s3://bucket/p"}
        or {"/lake": {"uri": ..., "write_mode": "through", "options": {"endpoint": ...}}}.
    config: a config file (docs/configuration.md) as a path or a dict; the arguments above are
        added to it. Default: $CAIRN_CONFIG.
    tls_ca, tls_cert, tls_key: TLS to the workers (default $CAIRN_TLS_CA/_CERT/_KEY); the
        certificate's name is the principal. token / token_file: a job token instead
        (default $CAIRN_TOKEN / $CAIRN_TOKEN_FILE). etcd_ca/cert/key: TLS to etcd.
    metadata_via_workers: ask the workers for stat and listings (no source credentials here).
    page_size, worker_timeout (seconds or "5s"): must match the workers' / per-request
        deadline. short_circuit: read a local worker's page files directly. no_cache: this
        client's misses are not cached (a one-pass scan). buffer_size: bytes of this
        process's page buffer (readahead; default 256 MiB; each DataLoader worker has one).

    Without etcd, mounts or config, $CAIRN_ETCD is used. Raises ValueError for bad settings,
    OSError when etcd cannot be reached.
    """
    return Client(**_settings(
        config=config, etcd=etcd, workers=workers, mounts=mounts, tls_ca=tls_ca,
        tls_cert=tls_cert, tls_key=tls_key, token=token, token_file=token_file, etcd_ca=etcd_ca,
        etcd_cert=etcd_cert, etcd_key=etcd_key, etcd_insecure_plaintext=etcd_insecure_plaintext,
        metadata_via_workers=metadata_via_workers, page_size=page_size,
        worker_timeout=worker_timeout, short_circuit=short_circuit, no_cache=no_cache,
        buffer_size=buffer_size))


# Every live client, so a forked child can reset their locks before anything runs there.
_CLIENTS = weakref.WeakSet()


def _before_fork():
    for client in list(_CLIENTS):
        client._export_for_fork()


def _after_fork_in_parent():
    for client in list(_CLIENTS):
        client._seed = None


def _after_fork_in_child():
    for client in list(_CLIENTS):
        client._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


class Client:
    """A connection to Cairn (thread-safe; usable in forked children). Use `connect()`."""

    def __init__(self, config, token="", short_circuit=True, no_cache=False, buffer_bytes=0):
        self._settings = {"config": config, "token": token, "short_circuit": short_circuit,
                          "no_cache": no_cache, "buffer_bytes": buffer_bytes}
        self._lock = threading.Lock()
        self._seed = None  # The parent's cached metadata, across a fork.
        self._native = self._make_native()
        self._pid = os.getpid()
        self._closed = False
        _CLIENTS.add(self)

    def _make_native(self):
        s = self._settings
        seed, self._seed = self._seed, None
        return _cairn.Client(json.dumps(s["config"]), s["token"], s["short_circuit"],
                             s["no_cache"], s["buffer_bytes"], seed)

    def _export_for_fork(self):
        # In the parent, just before a fork: a copy of what the native client has cached, for
        # the client the child will make. Never fails the fork.
        native = self._native
        if native is None or self._pid != os.getpid() or self._closed:
            return
        try:
            self._seed = native.export_metadata()
        except Exception:  # noqa: BLE001 - a closed client, or anything: the child lists.
            self._seed = None

    def _forked(self):
        # In the child, right after fork: the parent's threads are gone, so the native client
        # (and any lock another thread held) must not be used or destroyed here.
        self._lock = threading.Lock()
        if self._native is not None:
            self._native.abandon()
            self._native = None
        self._pid = os.getpid()

    def _core(self):
        """The native client of this process, made anew after a fork."""
        if self._closed:
            raise ValueError("I/O operation on a closed cairn client")
        if self._pid != os.getpid():  # A fork without register_at_fork's hook.
            self._forked()
        native = self._native
        if native is not None:
            return native
        with self._lock:
            if self._native is None:
                self._native = self._make_native()
            return self._native

    # -- pickling: a client travels to spawned workers as its settings ------------------------
    def __reduce__(self):
        s = self._settings
        return (Client, (s["config"], s["token"], s["short_circuit"], s["no_cache"],
                         s["buffer_bytes"]))

    # -- lifetime --------------------------------------------------------------------------
    def close(self):
        """Closes the client; files still open keep working until they are closed."""
        if self._closed:
            return
        self._closed = True
        native, self._native = self._native, None
        if native is not None and self._pid == os.getpid():
            native.close()
        _CLIENTS.discard(self)

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        doc = self._settings["config"]
        where = doc.get("etcd") or ",".join(doc.get("workers", [])) or "sources directly"
        state = "closed" if self._closed else "open"
        return f"<cairn.Client {where} ({state}) at {id(self):#x}>"

    # -- files -----------------------------------------------------------------------------
    def open(self, path, mode="rb", buffering=-1, encoding=None, errors=None, newline=None):
        """Opens a file like the built-in open(): "rb"/"r" read the version seen at open;
        "wb"/"w" (truncate), "xb"/"x" (exclusive create) and "ab"/"a" (append) write through
        the path's worker, and close() returns once the object is in the source (it raises if
        the upload failed; leaving a `with` block by an exception discards the write).
        buffering=0 gives the raw file (binary modes)."""
        return open_file(self, _normalize(path), mode, buffering, encoding, errors, newline)

    def read_range(self, path, offset=0, length=-1):
        """`length` bytes of `path` from `offset` (fewer at the end of the file; -1: to the
        end) as bytes."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        path = _normalize(path)
        return self._core().read_range(path, offset, length if length is not None else -1)

    def read_many(self, requests, parallelism=16):
        """Reads [(path, offset, length), ...] in parallel (up to `parallelism` at once) and
        returns the bytes in the same order; a length of -1 or None reads to the end. The
        ranges of one path come from one version of it. Raises the first failure."""
        reqs = []
        for item in requests:
            path, offset, length = item
            if offset < 0:
                raise ValueError("offsets must be >= 0")
            reqs.append((_normalize(path), int(offset), -1 if length is None else int(length)))
        return self._core().read_many(reqs, parallelism)

    # -- metadata ----------------------------------------------------------------------------
    def stat(self, path):
        """FileInfo of a file or directory; FileNotFoundError if there is none."""
        path = _normalize(path)
        return FileInfo._of(path, self._core().stat(path))

    def ls(self, path="/", detail=False):
        """The entries of a directory, sorted by name: full paths, or FileInfo with
        detail=True. A file lists as itself."""
        path = _normalize(path)
        try:
            entries = self._list(path)
        except NotADirectoryError:
            info = self.stat(path)
            return [info] if detail else [path]
        return entries if detail else [e.path for e in entries]

    def _list(self, path):
        """FileInfo of each entry of the directory `path` (NotADirectoryError for a file)."""
        base = "" if path == "/" else path
        return [FileInfo._of(f"{base}/{e['name']}", e) for e in self._core().list_dir(path)]

    def walk(self, path="/"):
        """Like os.walk (top-down): yields (dirpath, dirnames, filenames); nothing for a file
        or a missing path."""
        pending = [_normalize(path)]
        while pending:
            top = pending.pop()
            try:
                entries = self._list(top)
            except (FileNotFoundError, NotADirectoryError):
                continue
            dirs = [e.name for e in entries if e.is_dir]
            yield top, dirs, [e.name for e in entries if not e.is_dir]
            base = "" if top == "/" else top
            pending.extend(f"{base}/{d}" for d in reversed(dirs))

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def isdir(self, path):
        try:
            return self.stat(path).is_dir
        except FileNotFoundError:
            return False

    def isfile(self, path):
        try:
            return not self.stat(path).is_dir
        except FileNotFoundError:
            return False

    # -- changes (write-through mounts; OSError(EROFS) elsewhere) ------------------------------
    def rm(self, path, recursive=False):
        """Removes a file; with recursive=True also a directory and everything under it."""
        path = _normalize(path)
        if recursive and self.isdir(path):
            for top, dirs, files in list(self.walk(path))[::-1]:
                base = "" if top == "/" else top
                for name in files:
                    self._core().remove(f"{base}/{name}")
                for name in dirs:
                    self._rmdir_if_there(f"{base}/{name}")
            self._rmdir_if_there(path)
            return
        if self.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "is a directory (use rmdir or recursive=True)",
                                    path)
        self._core().remove(path)

    def _rmdir_if_there(self, path):
        try:
            self._core().remove_dir(path)
        except FileNotFoundError:
            pass  # S3 directories without a marker vanish with their last file.

    def rmdir(self, path):
        """Removes an empty directory (OSError ENOTEMPTY otherwise)."""
        self._core().remove_dir(_normalize(path))

    def mkdir(self, path, parents=False, exist_ok=False):
        """Creates a directory (S3: a "dir/" marker object)."""
        path = _normalize(path)
        if parents:
            parent = posixpath.dirname(path)
            if parent != path and not self.exists(parent):
                self.mkdir(parent, parents=True, exist_ok=True)
        try:
            self._core().make_dir(path)
        except FileExistsError:
            if not (exist_ok and self.isdir(path)):
                raise

    def rename(self, src, dst, replace=True):
        """Moves a file within a mount, atomically for `dst` (no reader sees a partial file);
        with replace=False an existing `dst` raises FileExistsError."""
        self._core().rename(_normalize(src), _normalize(dst), not replace)

    def writable(self, path):
        """True when `path` lies in a write-through mount."""
        return self._core().writable(_normalize(path))

    # -- the cache -------------------------------------------------------------------------
    def load(self, path, progress=None, *, max_bytes_per_second=0, parallelism=32, replicas=0,
             skip_cached=False):
        """Loads a file or everything under a directory into the cache (`cairn load`).
        `progress(dict)` is called about 4 times a second on this thread; an exception from it
        (KeyboardInterrupt too) stops the load. Returns the totals (pages_loaded,
        pages_cached_before, pages_failed, bytes_from_source, ...)."""
        return self._core().load(_normalize(path), max_bytes_per_second, parallelism, replicas,
                                 skip_cached, False, progress)

    def free(self, path):
        """Drops the cached pages of a file or directory from every worker."""
        return self._core().free(_normalize(path))

    def cached_fraction(self, path):
        """The fraction (0.0 to 1.0) of the pages of a file or directory that are cached on
        every copy the mount keeps; 1.0 for an empty file. Reads nothing from the source."""
        r = self._core().load(_normalize(path), 0, 32, 0, False, True, None)
        if r["pages_total"] == 0:
            return 1.0
        return (r["pages_total"] - r["pages_missing"]) / r["pages_total"]

    def cached_many(self, paths, parallelism=16):
        """cached_fraction of each path, asked in parallel."""
        paths = [_normalize(p) for p in paths]
        if not paths:
            return []
        with ThreadPoolExecutor(min(parallelism, len(paths))) as pool:
            return list(pool.map(self.cached_fraction, paths))

    def sync(self, path="/", timeout=3600.0):
        """Waits until every file closed under `path` on a write-back mount is in its source
        (on every worker this client knows), as `cairn sync` does. Raises TimeoutError naming
        what still waits after `timeout` seconds. Returns at once where nothing waits (and on
        write-through mounts, where close already waited)."""
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self._core().sync_writes(_normalize(path), float(min(timeout, 2**31 / 1000)))

    def invalidate(self, path):
        """Makes every client see the source's current state of `path` (and below) now."""
        self._core().invalidate(_normalize(path))

    def stats(self):
        """Counters of this client (page reads, fallbacks to the source, buffer hits, ...)."""
        return self._core().stats()
