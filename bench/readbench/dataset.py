"""The benchmark dataset: N small files and M large files of random bytes, written once to local
disk (the `local` system reads them there) and uploaded to the bucket every other system reads."""
import hashlib
import os
import threading
import time

from .workloads import MIB

SMALL_DIR = "small"
LARGE_DIR = "large"


class Dataset:
    def __init__(self, root, n_small, small_size, n_large, large_size):
        self.root = root
        self.small = [f"{SMALL_DIR}/f{i:05d}.bin" for i in range(n_small)]
        self.large = [f"{LARGE_DIR}/L{i:02d}.bin" for i in range(n_large)]
        self.small_size = small_size
        self.large_size = large_size
        self.hashes = {}  # key -> sha256 of a sample of files, for the post-run content check.

    @property
    def keys(self):
        return self.small + self.large

    def size_of(self, key):
        return self.small_size if key.startswith(SMALL_DIR + "/") else self.large_size

    @property
    def total_bytes(self):
        return len(self.small) * self.small_size + len(self.large) * self.large_size

    def sample_keys(self):
        """Files whose content is checked through every system after its measurements."""
        picks = sorted({0, len(self.small) // 2, len(self.small) - 1}) if self.small else []
        return [self.small[i] for i in picks] + self.large[:1]

    def generate(self):
        """Writes the files (random, incompressible) and hashes the sample. Returns seconds."""
        t0 = time.monotonic()
        os.makedirs(os.path.join(self.root, SMALL_DIR), exist_ok=True)
        os.makedirs(os.path.join(self.root, LARGE_DIR), exist_ok=True)
        sample = set(self.sample_keys())
        for key in self.keys:
            size = self.size_of(key)
            h = hashlib.sha256()
            with open(os.path.join(self.root, key), "wb") as f:
                left = size
                while left:
                    chunk = os.urandom(min(left, 4 * MIB))
                    f.write(chunk)
                    if key in sample:
                        h.update(chunk)
                    left -= len(chunk)
            if key in sample:
                self.hashes[key] = h.hexdigest()
        return time.monotonic() - t0

    def upload(self, reader, parallel=8):
        """PUTs every file to the bucket with single-part PUTs (s3rver's multipart ETags differ
        from S3's); returns seconds."""
        t0 = time.monotonic()
        keys = list(self.keys)
        lock = threading.Lock()
        errors = []

        def worker():
            while not errors:
                with lock:
                    if not keys:
                        return
                    key = keys.pop()
                try:
                    reader.put_file(key, os.path.join(self.root, key))
                except Exception as e:  # noqa: BLE001 - reported below.
                    errors.append(f"{key}: {e}")

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(parallel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("upload failed: " + errors[0])
        return time.monotonic() - t0

    def verify(self, root, keys=None):
        """Hashes sample files under `root`; returns a list of mismatches (empty if all match)."""
        bad = []
        for key in keys or self.sample_keys():
            h = hashlib.sha256()
            try:
                with open(os.path.join(root, key), "rb") as f:
                    while True:
                        b = f.read(4 * MIB)
                        if not b:
                            break
                        h.update(b)
            except OSError as e:
                bad.append(f"{key}: {e}")
                continue
            if h.hexdigest() != self.hashes[key]:
                bad.append(f"{key}: content differs from the source")
        return bad
