"""Cairn's Python SDK: read and write a Cairn namespace from Python, without a FUSE mount.

    import cairn
    client = cairn.connect()                      # $CAIRN_ETCD, $CAIRN_CONFIG, ... (docs/python.md)
    with client.open("/lake/train/000.tar", "rb") as f:
        header = f.read(512)
    data = client.read_range("/lake/x.bin", offset=4096, length=1 << 20)
    with client.open("/ckpt/step-1000.pt", "wb") as f:
        torch.save(model.state_dict(), f)

The client reads pages from the cache workers (falling back to the source when a worker is
down), writes through the worker that owns a path (write-through: `close` returns once the
object is in the data lake), and is safe to use from many threads and across `fork()`.

Also here: `cairn.filesystem.CairnFileSystem` (fsspec protocol ``cairn://``) and, when PyTorch
is installed, `cairn.torch` (datasets and a cache-aware sampler).
"""

from .client import Client, FileInfo, connect

__all__ = ["Client", "FileInfo", "connect"]
__version__ = "0.1.0"
