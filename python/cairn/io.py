"""File objects of the Python SDK: `Client.open` returns these, wrapped in io's buffered and
text layers like the built-in open()."""

import contextlib
import errno
import io
import os
import weakref

__all__ = ["RawReader", "RawWriter", "open_file"]

# Python-side buffer of a buffered file: large enough that line-by-line and small reads do not
# cross into the client for every few bytes, small because the client keeps its own page
# buffer with readahead behind it.
BUFFER_SIZE = 128 << 10

_MODES = {
    # mode (without "b"/"t") -> (reading, create, exclusive, truncate, append)
    "r": (True, False, False, False, False),
    "w": (False, True, False, True, False),
    "x": (False, True, True, True, False),
    "a": (False, True, False, False, True),
}


# Every file with a native handle, so a forked child drops the parent's handles before anything
# else runs there (a handle destroyed in the child could release the parent's client, whose
# threads the child does not have).
_OPEN_FILES = weakref.WeakSet()


def _after_fork_in_child():
    for f in list(_OPEN_FILES):
        f._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _byte_view(buffer):
    """`buffer` as a flat memoryview of bytes (a numpy array of uint32 included)."""
    view = memoryview(buffer)
    if view.ndim != 1 or view.format not in ("B", "b", "c"):
        view = view.cast("B")
    return view


def _seek_target(f, offset, whence, size):
    """The position seek(offset, whence) moves `f` to; `size()` gives the file's size."""
    if whence == io.SEEK_SET:
        pos = offset
    elif whence == io.SEEK_CUR:
        pos = f._pos + offset
    elif whence == io.SEEK_END:
        pos = size() + offset
    else:
        raise ValueError(f"invalid whence ({whence})")
    if pos < 0:
        raise OSError(errno.EINVAL, "negative seek position", f.name)
    return pos


class RawReader(io.RawIOBase):
    """A file open for reading, pinned to the version seen at open (every byte it returns
    belongs to that version). Seekable; `readinto` fills the caller's buffer without a copy."""

    def __init__(self, client, path):
        super().__init__()
        self.name = path
        self._client = client
        self._native = client._core().open(path)
        self._pid = os.getpid()
        self._info = self._native.info
        self._pos = 0
        _OPEN_FILES.add(self)

    def _forked(self):
        old, self._native = self._native, None
        if old is not None:
            old.abandon()
        self._pid = os.getpid()

    @property
    def size(self):
        return self._info["size"]

    @property
    def version(self):
        return self._info["version"]

    def _reader(self):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if self._pid != os.getpid():
            # A forked child: the parent's reader must be neither used nor destroyed here; the
            # file is opened again through the child's own client, at the same version.
            self._forked()
        if self._native is None:
            native = self._client._core().open(self.name)
            if native.info["version"] != self._info["version"]:
                raise OSError(errno.ESTALE, "the file changed since it was opened; reopen it",
                              self.name)
            self._native = native
        return self._native

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer):
        reader = self._reader()
        view = _byte_view(buffer)
        if not view.nbytes:
            return 0
        n = reader.readinto(self._pos, view)
        self._pos += n
        return n

    def read(self, size=-1):
        reader = self._reader()
        if size is None or size < 0:
            return self.readall()
        data = reader.read(self._pos, size)
        self._pos += len(data)
        return data

    def readall(self):
        data = self._reader().read(self._pos, -1)
        self._pos += len(data)
        return data

    def seek(self, offset, whence=io.SEEK_SET):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        self._pos = _seek_target(self, offset, whence, lambda: self.size)
        return self._pos

    def tell(self):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        return self._pos

    def close(self):
        self._native = None
        _OPEN_FILES.discard(self)
        super().close()

    def __repr__(self):
        return f"<cairn.RawReader name={self.name!r} size={self.size}>"


class RawWriter(io.RawIOBase):
    """A file open for writing through its path's worker. Writes go out as they come (the
    bytes are copied, so the caller's buffer is free at once), at any offset (seek back to
    patch a header); an error of an earlier write surfaces on a later call. `sync()` and
    `close()` return once the whole file is in the source; a failed close discards the write
    and raises. `abort()` discards it on purpose."""

    def __init__(self, client, path, create=True, exclusive=False, truncate=True, append=False):
        super().__init__()
        self.name = path
        self._client = client
        self._native = client._core().open_write(path, create, exclusive, truncate)
        self._pid = os.getpid()
        self._pos = self._native.size if append else 0
        self._append = append
        self._done = False
        self._failed = None  # The first write or truncate that raised.
        self._forsaken = False  # A forked child's copy of the parent's file.
        _OPEN_FILES.add(self)

    def _forked(self):
        if self._native is not None:
            self._forsake()

    def _writer(self):
        if self._pid != os.getpid():
            self._forsake()
        if self._forsaken:
            # The parent may still be writing this file: two processes writing one handle
            # would interleave blindly, and only the parent commits or aborts it.
            raise OSError(errno.EBADF, "a file opened for writing cannot be used after fork()",
                          self.name)
        if self.closed or self._done:
            raise ValueError("I/O operation on closed file")
        return self._native

    def _forsake(self):
        """In a forked child: drop the parent's writer without touching it."""
        self._forsaken = True
        self._done = True
        native, self._native = self._native, None
        _OPEN_FILES.discard(self)
        if native is not None:
            native.abandon()

    def writable(self):
        return True

    def seekable(self):
        return True

    def write(self, data):
        writer = self._writer()
        view = _byte_view(data)
        n = view.nbytes
        if n:
            if self._append:
                self._pos = writer.size
            with self._failing():
                writer.write(self._pos, view)
                self._pos += n
        return n

    @contextlib.contextmanager
    def _failing(self):
        """A write or truncate that raised (a refusal, MemoryError, Ctrl-C) may have left the
        file with part of it: close() then discards the file rather than commit it so (a
        BufferedWriter closes its raw file even when its last flush failed)."""
        try:
            yield
        except BaseException as e:
            if self._failed is None:
                self._failed = e
            raise

    def _earlier_failure(self, what):
        """The error a sync or close reports after a write or truncate failed: ENOSPC or EDQUOT
        when that failure was one (as the kernel reports a writeback that found no room, at
        fsync and close), else EIO."""
        err = getattr(self._failed, "errno", None)
        err = err if err in (errno.ENOSPC, errno.EDQUOT) else errno.EIO
        return OSError(err, "an earlier write failed (" + repr(self._failed) + "); " + what,
                       self.name)

    def seek(self, offset, whence=io.SEEK_SET):
        writer = self._writer()
        self._pos = _seek_target(self, offset, whence, lambda: writer.size)
        return self._pos

    def tell(self):
        self._writer()
        return self._pos

    def truncate(self, size=None):
        writer = self._writer()
        size = self._pos if size is None else size
        if size < 0:
            raise OSError(errno.EINVAL, "negative size", self.name)
        with self._failing():
            writer.truncate(size)
        return size

    def sync(self):
        """Makes everything written so far durable in the source (like fsync); writing may go
        on. Returns the committed object's info (size, version)."""
        writer = self._writer()
        if self._failed is not None:
            raise self._earlier_failure("nothing is committed")
        return writer.sync()

    def fileno(self):
        raise io.UnsupportedOperation("a cairn file has no file descriptor")

    def abort(self):
        """Discards what was written since the last sync (all of it if none) and closes."""
        if self._pid != os.getpid():
            self._forsake()
        if not self._done and self._native is not None:
            self._done = True
            try:
                self._native.abort()
            finally:
                self._native = None
                _OPEN_FILES.discard(self)
        super().close()

    def close(self):
        if self.closed:
            return
        if self._pid != os.getpid():
            self._forsake()  # The parent commits or aborts it, not a forked child.
        if self._done or self._native is None:
            super().close()
            return
        self._done = True
        native, self._native = self._native, None
        _OPEN_FILES.discard(self)
        try:
            if self._failed is not None:
                raise self._earlier_failure("nothing was committed")
            self.committed = native.close()
        except BaseException:
            try:
                native.abort()
            except OSError:
                pass
            raise
        finally:
            super().close()

    def __exit__(self, exc_type, exc, tb):
        # As BufferedWriter: a file left by an exception (a copy cut short, Ctrl-C) is
        # discarded, never committed half written over the object under its name.
        if exc_type is not None:
            _abort_quietly(self)
        return super().__exit__(exc_type, exc, tb)

    def __repr__(self):
        return f"<cairn.RawWriter name={self.name!r}>"


class BufferedWriter(io.BufferedWriter):
    """io.BufferedWriter that discards the write when its `with` block raises (a checkpoint
    half written must not appear under its name), and commits it otherwise."""

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            _abort_quietly(self.raw)
        return super().__exit__(exc_type, exc, tb)

    def sync(self):
        self.flush()
        return self.raw.sync()

    def abort(self):
        self.raw.abort()


class TextWriter(io.TextIOWrapper):
    """io.TextIOWrapper that discards the write when its `with` block raises."""

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            _abort_quietly(self.buffer.raw)
        return super().__exit__(exc_type, exc, tb)


def _abort_quietly(raw):
    """Discards a writer left by an exception. The exception is what the caller sees: an abort
    that fails too (the worker unreachable; its handle then goes when idle, nothing committed)
    must not replace it, nor keep the file from closing."""
    try:
        raw.abort()
    except OSError:
        pass


def _parse_mode(mode):
    if not isinstance(mode, str):
        raise TypeError("mode must be a str")
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwxabt+") or ("b" in chars and "t" in chars):
        raise ValueError(f"invalid mode: {mode!r}")
    if "+" in chars:
        raise ValueError(f"mode {mode!r}: a cairn file is open for reading or for writing, "
                         "not both")
    kinds = chars & set("rwxa")
    if len(kinds) != 1:
        raise ValueError(f"invalid mode: {mode!r}")
    return kinds.pop(), "b" in chars


def open_file(client, path, mode="rb", buffering=-1, encoding=None, errors=None, newline=None):
    kind, binary = _parse_mode(mode)
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode takes no encoding, errors or newline")
    if buffering == 0 and not binary:
        raise ValueError("can't have unbuffered text I/O")
    if buffering == 1 and binary:
        buffering = -1  # Line buffering means nothing in binary mode (as open() warns).
    size = BUFFER_SIZE if buffering in (-1, 1) else buffering
    reading, create, exclusive, truncate, append = _MODES[kind]
    if reading:
        raw = RawReader(client, path)
        if buffering == 0:
            return raw
        buffered = io.BufferedReader(raw, buffer_size=size)
        if binary:
            return buffered
        return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors,
                                newline=newline)
    raw = RawWriter(client, path, create=create, exclusive=exclusive, truncate=truncate,
                    append=append)
    if buffering == 0:
        return raw
    buffered = BufferedWriter(raw, buffer_size=size)
    if binary:
        return buffered
    return TextWriter(buffered, encoding=encoding or "utf-8", errors=errors, newline=newline,
                      line_buffering=buffering == 1)
