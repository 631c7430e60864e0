"""PyTorch datasets over Cairn and a cache-aware sampler (needs PyTorch).

    from cairn.torch import CairnDataset, CacheAwareSampler
    ds = CairnDataset("/lake/imagenet/train", decode=decode_jpeg, client=cairn.connect())
    sampler = CacheAwareSampler(ds, window=512)          # + rank=, num_replicas= under DDP
    loader = torch.utils.data.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=4)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader: ...

Datasets hold a `cairn.Client`, which works in forked DataLoader workers (each builds its own
connections on first use) and pickles as its settings for the spawn start method.
"""

import collections
import random
import tarfile
import threading
from concurrent.futures import ThreadPoolExecutor

import torch.utils.data as tud

from .client import _normalize, connect

__all__ = ["CairnDataset", "CairnShardDataset", "CacheAwareSampler"]


def _distributed(num_replicas, rank):
    """(world size, rank): the arguments, else torch.distributed's when it is initialised."""
    if num_replicas is None or rank is None:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
    num_replicas = 1 if num_replicas is None else num_replicas
    rank = 0 if rank is None else rank
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} is not in [0, {num_replicas})")
    return num_replicas, rank


def _list_files(client, prefix, suffixes):
    files = []
    for top, _, names in client.walk(prefix):
        base = "" if top == "/" else top
        for name in names:
            if suffixes is None or name.endswith(tuple(suffixes)):
                files.append(f"{base}/{name}")
    if not files and client.isfile(prefix):
        files.append(_normalize(prefix))
    files.sort()
    return files


class CairnDataset(tud.Dataset):
    """A map-style dataset: one sample per file under `prefix` (sorted by path; only names
    ending in one of `suffixes` if given), or the paths in `files`. Item i is
    `decode(bytes)` (the raw bytes without `decode`); `paths[i]` is its path."""

    def __init__(self, prefix=None, decode=None, *, files=None, suffixes=None, client=None):
        if (prefix is None) == (files is None):
            raise ValueError("give prefix or files")
        self.client = client if client is not None else connect()
        self.decode = decode
        if files is not None:
            self.paths = [_normalize(p) for p in files]
        else:
            self.paths = _list_files(self.client, _normalize(prefix), suffixes)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        data = self.client.read_range(self.paths[index])
        return self.decode(data) if self.decode is not None else data


class CairnShardDataset(tud.IterableDataset):
    """An iterable dataset over tar shards (WebDataset layout: the members of one sample share
    a key, "000123.jpg" and "000123.cls"). Yields {"__key__": key, "jpg": bytes, ...} per
    sample (through `decode` if given), streaming each shard once. Shards are split between
    ranks (rank/num_replicas, or torch.distributed's) and then between DataLoader workers;
    with `shuffle`, the shard order changes with `set_epoch`."""

    def __init__(self, prefix=None, decode=None, *, shards=None, suffixes=(".tar",),
                 client=None, shuffle=False, seed=0, num_replicas=None, rank=None):
        if (prefix is None) == (shards is None):
            raise ValueError("give prefix or shards")
        self.client = client if client is not None else connect()
        self.decode = decode
        self.shards = ([_normalize(p) for p in shards] if shards is not None
                       else _list_files(self.client, _normalize(prefix), suffixes))
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.num_replicas, self.rank = _distributed(num_replicas, rank)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _my_shards(self):
        shards = list(self.shards)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(shards)
        shards = shards[self.rank::self.num_replicas]
        worker = tud.get_worker_info()
        if worker is not None:
            shards = shards[worker.id::worker.num_workers]
        return shards

    def __iter__(self):
        for shard in self._my_shards():
            yield from self._samples(shard)

    def _samples(self, shard):
        with self.client.open(shard, "rb", buffering=1 << 20) as f:
            with tarfile.open(fileobj=f, mode="r|") as tar:
                sample, key = None, None
                for member in tar:
                    if not member.isfile():
                        continue
                    base = member.name.rsplit("/", 1)[-1]
                    stem, dot, ext = base.partition(".")
                    dirname = member.name[:len(member.name) - len(base)]
                    member_key = dirname + stem
                    if member_key != key:
                        if sample is not None:
                            yield self._out(sample)
                        sample, key = {"__key__": member_key, "__shard__": shard}, member_key
                    sample[ext if dot else ""] = tar.extractfile(member).read()
                if sample is not None:
                    yield self._out(sample)

    def _out(self, sample):
        return self.decode(sample) if self.decode is not None else sample


class CacheAwareSampler(tud.Sampler):
    """Each epoch visits every index of the dataset exactly once (over all ranks together) in
    a random order, arranged so that an epoch over a dataset larger than the cache reads fewer
    bytes from the source and waits less:

    * the epoch's permutation (seeded by seed + epoch, the same on every rank) is dealt to the
      ranks (rank r takes every num_replicas-th index from r: disjoint, together complete);
    * each rank's share is cut into windows of `window` indices (default: one window, the
      whole share); within a window the samples already cached come first and the missing
      ones after, each group in its random order. Which samples are cached is asked of the
      workers once per window (no bytes are read);
    * the missing samples are loaded into the cache a little ahead of their turn:
      `prefetch_depth` samples ahead of the sampler, starting when a window's cached samples
      have all been handed out. Not earlier: in a full cache every load evicts a page, and
      until the cached samples are read the pages evicted first are theirs (least recently
      used: last read in the previous epoch), so loading ahead of them trades a hit for a miss
      (docs/benchmarks.md, "Cache-aware sampler": loading the window after next while a window
      was read made an epoch read 1.5x the bytes of plain shuffling).

    Measured with an LRU cache of half the dataset (docs/benchmarks.md): plain shuffling reads
    about 80% of the dataset from the source per epoch; one window, about 50% (every byte the
    cache holds at the start of an epoch is a hit). Small windows gain little over shuffling:
    the misses of early windows evict the cached samples of later ones.

    The order a model sees: uniformly random within the cached group and within the missing
    group, and each epoch a new permutation; which samples are cached follows from the
    previous epoch's order (its last-read samples). `dataset` is a CairnDataset (or anything
    with `paths` and `client`). Shares differ by at most one index between ranks (no padding:
    nothing is repeated); `drop_last=True` gives equal shares.
    """

    def __init__(self, dataset, *, window=None, num_replicas=None, rank=None, seed=0,
                 shuffle=True, prefetch=True, prefetch_depth=64, drop_last=False,
                 load_parallelism=8, client=None):
        if window is not None and window < 1:
            raise ValueError("window must be >= 1 (or None: the whole share)")
        if prefetch_depth < 1:
            raise ValueError("prefetch_depth must be >= 1")
        self.paths = list(dataset.paths)
        self.client = client if client is not None else dataset.client
        self.window = window
        self.num_replicas, self.rank = _distributed(num_replicas, rank)
        self.seed, self.epoch = seed, 0
        self.shuffle, self.prefetch, self.drop_last = shuffle, prefetch, drop_last
        self.prefetch_depth = prefetch_depth
        self.load_parallelism = load_parallelism
        self.stats = {"windows": 0, "cached_first": 0, "missing": 0, "prefetched": 0}

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _share(self):
        order = list(range(len(self.paths)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        if self.drop_last:
            order = order[:len(order) - len(order) % self.num_replicas]
        return order[self.rank::self.num_replicas]

    def __len__(self):
        n = len(self.paths)
        if self.drop_last:
            return n // self.num_replicas
        return len(range(self.rank, n, self.num_replicas))

    def __iter__(self):
        share = self._share()
        size = self.window or max(len(share), 1)
        windows = [share[i:i + size] for i in range(0, len(share), size)]
        loader = _Prefetcher(self.client, self.load_parallelism) if self.prefetch else None
        try:
            for indices in windows:
                cached = self.client.cached_many([self.paths[i] for i in indices])
                first = [i for i, c in zip(indices, cached) if c >= 1.0]
                later = [i for i, c in zip(indices, cached) if c < 1.0]
                self.stats["windows"] += 1
                self.stats["cached_first"] += len(first)
                self.stats["missing"] += len(later)
                yield from first
                if loader is not None:
                    loader.submit([self.paths[i] for i in later[:self.prefetch_depth]])
                for j, index in enumerate(later):
                    ahead = j + self.prefetch_depth
                    if loader is not None and ahead < len(later):
                        loader.submit([self.paths[later[ahead]]])
                    yield index
        finally:
            if loader is not None:
                self.stats["prefetched"] += loader.close()


class _Prefetcher:
    """Loads paths into the cache on background threads, in the order submitted."""

    def __init__(self, client, parallelism):
        self._client = client
        self._pool = ThreadPoolExecutor(max(1, parallelism), thread_name_prefix="cairn-prefetch")
        self._lock = threading.Lock()
        self._queue = collections.deque()
        self._loaded = 0

    def submit(self, paths):
        with self._lock:
            self._queue.extend(paths)
            jobs = len(paths)
        for _ in range(jobs):
            self._pool.submit(self._one)

    def _one(self):
        with self._lock:
            if not self._queue:
                return
            path = self._queue.popleft()
        try:
            r = self._client.load(path, skip_cached=True, parallelism=4)
            with self._lock:
                self._loaded += r.get("pages_loaded", 0) > 0
        except (OSError, ValueError):
            pass  # Best effort: the read itself will fetch it (and fail loudly if it must).

    def close(self):
        """Waits for the loads submitted (at most prefetch_depth beyond what was handed out:
        the DataLoader may still be reading them); returns how many loaded anything."""
        self._pool.shutdown(wait=True)
        return self._loaded
