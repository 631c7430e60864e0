"""The test lake: a source folder of known files, shared by the cluster, cache-operation and
rules tests (and the benchmarks that import them).

`Lake(root, files)` writes `files` (a path relative to the mount -> its bytes) under `root` and
answers questions about them: names by prefix or folder, bytes, 1 MiB pages, SHA-256 digests.
Wherever a method takes `names`, it may be a list of names, a folder name (a str: the names
under "<folder>/"), or None (every file).
"""

import hashlib

MiB = 1 << 20


def pages_of(size, page_size=MiB):
    """The pages a file of `size` bytes has (0 for an empty file)."""
    return (size + page_size - 1) // page_size


class Lake:
    """A source folder; `files` maps a path relative to the mount to its bytes."""

    def __init__(self, root, files):
        self.root = root
        self.files = files
        self.uri = "file://" + str(root)
        self.sha = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
        for name, data in files.items():
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def names(self, prefix="", exclude=None):
        """Sorted names that start with `prefix` and not with `exclude`."""
        return sorted(n for n in self.files
                      if n.startswith(prefix) and (exclude is None or not n.startswith(exclude)))

    def folder(self, folder):
        """Sorted names under `folder`/ (so "q" is not "q2")."""
        return self.names(folder + "/")

    def _resolve(self, names):
        if names is None:
            return list(self.files)
        if isinstance(names, str):
            return self.folder(names)
        return names

    def bytes(self, names=None):
        return sum(len(self.files[n]) for n in self._resolve(names))

    def pages(self, names=None):
        return sum(pages_of(len(self.files[n])) for n in self._resolve(names))

    def nonempty(self, names=None):
        return sorted(n for n in self._resolve(names) if self.files[n])
