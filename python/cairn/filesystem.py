"""fsspec filesystem for Cairn: the protocol ``cairn``.

    import fsspec
    with fsspec.open("cairn:///lake/train/x.bin", "rb") as f: ...
    fs = fsspec.filesystem("cairn")                  # connect() from the environment
    fs = fsspec.filesystem("cairn", etcd="https://etcd-1:2379")   # or connect()'s arguments
    pandas.read_csv("cairn:///lake/table.csv")

``cairn:///lake/x`` and ``cairn://lake/x`` both name the namespace path ``/lake/x``. The
protocol is registered by the package's entry point (fsspec.specs), so fsspec finds it without
an import. Storage options are the arguments of `cairn.connect`, or ``client=`` an existing
client.
"""

import datetime
import os

from fsspec.spec import AbstractFileSystem

from .client import Client, FileInfo, connect

__all__ = ["CairnFileSystem"]

_COPY_CHUNK = 8 << 20


def _copy(src, dst, callback=None):
    """Copies file object `src` to `dst` in _COPY_CHUNK pieces, reporting to `callback`."""
    while True:
        chunk = src.read(_COPY_CHUNK)
        if not chunk:
            return
        dst.write(chunk)
        if callback is not None:
            callback.relative_update(len(chunk))


def _write_mode(mode):
    """fsspec's `mode` of pipe_file and put_file: "overwrite" replaces what is there, "create"
    raises FileExistsError when the path exists (an exclusive create)."""
    if mode == "overwrite":
        return "wb"
    if mode == "create":
        return "xb"
    raise ValueError(f"mode must be 'overwrite' or 'create', not {mode!r}")


def _entry(info: FileInfo):
    return {"name": info.path, "size": info.size,
            "type": "directory" if info.is_dir else "file", "version": info.version,
            "mtime": info.mtime}


class CairnFileSystem(AbstractFileSystem):
    """A Cairn namespace as an fsspec filesystem (see the module's documentation)."""

    protocol = "cairn"
    root_marker = "/"

    def __init__(self, client=None, **connect_kwargs):
        super().__init__(client=client, **connect_kwargs)
        if client is not None and connect_kwargs:
            raise ValueError("give client= or connect() arguments, not both")
        if client is not None and not isinstance(client, Client):
            raise TypeError("client must be a cairn.Client")
        self.client = client if client is not None else connect(**connect_kwargs)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, (list, tuple)):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("cairn://"):
            path = path[len("cairn://"):]
        elif path.startswith("cairn:"):
            path = path[len("cairn:"):]
        path = "/" + path.lstrip("/")
        return path.rstrip("/") or "/"

    def unstrip_protocol(self, name):
        return "cairn://" + self._strip_protocol(name)

    # -- metadata --------------------------------------------------------------------------
    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        entries = self.client.ls(path, detail=True)
        if detail:
            return [_entry(e) for e in entries]
        return [e.path for e in entries]

    def info(self, path, **kwargs):
        return _entry(self.client.stat(self._strip_protocol(path)))

    def exists(self, path, **kwargs):
        try:
            return self.client.exists(self._strip_protocol(path))
        except ValueError:
            return False

    def ukey(self, path):
        return self.info(path)["version"]

    def modified(self, path):
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"],
                                               tz=datetime.timezone.utc)

    # -- reads -----------------------------------------------------------------------------
    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        if not autocommit:
            raise NotImplementedError("cairn commits each file at close; autocommit=False "
                                      "(transactions) is not supported")
        return self.client.open(self._strip_protocol(path), mode)

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        if start is None and end is None:
            return self.client.read_range(path)
        start, end = self._absolute_range(path, start, end)
        if end <= start:
            return b""
        return self.client.read_range(path, start, end - start)

    def _absolute_range(self, path, start, end):
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self.client.stat(path).size
            if start is not None and start < 0:
                start = max(size + start, 0)
            if end is not None and end < 0:
                end = max(size + end, 0)
        start = start or 0
        if end is None:
            end = 1 << 62
        return start, end

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        if not (len(paths) == len(starts) == len(ends)):
            raise ValueError("paths, starts and ends must have the same length")
        requests = []
        for path, start, end in zip(paths, starts, ends):
            path = self._strip_protocol(path)
            s, e = self._absolute_range(path, start, end)
            requests.append((path, s, max(e - s, 0)))
        try:
            return self.client.read_many(requests)
        except (OSError, ValueError):
            if on_error != "return":
                raise
        out = []  # One failed: read each alone, so every other range still comes back.
        for path, offset, length in requests:
            try:
                out.append(self.client.read_range(path, offset, length))
            except (OSError, ValueError) as e:
                out.append(e)
        return out

    def get_file(self, rpath, lpath, callback=None, outfile=None, **kwargs):
        rpath = self._strip_protocol(rpath)
        if self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        with self.client.open(rpath, "rb", buffering=0) as src:
            if callback is not None:
                callback.set_size(src.size)
            target = outfile if outfile is not None else open(lpath, "wb")
            try:
                _copy(src, target, callback)
            finally:
                if outfile is None:
                    target.close()

    # -- writes (write-through mounts) -----------------------------------------------------
    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        with self.client.open(self._strip_protocol(path), _write_mode(mode)) as f:
            f.write(value)

    def put_file(self, lpath, rpath, callback=None, mode="overwrite", **kwargs):
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        with open(lpath, "rb") as src, \
                self.client.open(rpath, _write_mode(mode), buffering=0) as dst:
            if callback is not None:
                callback.set_size(os.fstat(src.fileno()).st_size)
            _copy(src, dst, callback)

    def cp_file(self, path1, path2, **kwargs):
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.isdir(path1):
            self.makedirs(path2, exist_ok=True)
            return
        with self.client.open(path1, "rb", buffering=0) as src, \
                self.client.open(path2, "wb", buffering=0) as dst:
            _copy(src, dst)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        if isinstance(path1, str) and isinstance(path2, str) and self.isfile(path1):
            # One file: a rename, atomic for the new name (no copy through this process). Into
            # a directory (one that exists, or a path2 ending in "/") under its own name, as
            # fsspec moves; onto itself, nothing.
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            if path2.endswith("/") or self.isdir(dst):
                dst = dst.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
            if src != dst:
                self.client.rename(src, dst)
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def rm_file(self, path):
        self.client.rm(self._strip_protocol(path))

    def _rm(self, path):
        path = self._strip_protocol(path)
        if self.client.isdir(path):
            try:
                self.client.rmdir(path)
            except FileNotFoundError:
                pass  # An S3 "directory" without a marker is gone with its last file.
        else:
            self.client.rm(path)

    def rm(self, path, recursive=False, maxdepth=None):
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        # Deepest first, so directories are empty when their turn comes.
        for p in sorted(paths, key=lambda p: (p.count("/"), p), reverse=True):
            self._rm(p)

    def mkdir(self, path, create_parents=True, **kwargs):
        self.client.mkdir(self._strip_protocol(path), parents=create_parents)

    def makedirs(self, path, exist_ok=False):
        self.client.mkdir(self._strip_protocol(path), parents=True, exist_ok=exist_ok)

    def rmdir(self, path):
        self.client.rmdir(self._strip_protocol(path))

    def invalidate_cache(self, path=None):
        # No listing cache lives here: the client's metadata cache follows the mount's TTL and
        # is dropped for every client by Client.invalidate.
        pass
