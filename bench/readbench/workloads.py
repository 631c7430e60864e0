"""The measured workloads: file epochs, direct S3 GET epochs, fio random reads, DataLoader epochs.

Each returns a plain dict of numbers (JSON-ready). Readers count bytes and fail loudly on a short
or long file, so a system that returns the wrong amount of data cannot post a good number.
"""
import json
import os
import subprocess
import threading
import time

MIB = 1 << 20


class WorkloadError(RuntimeError):
    """A measurement could not complete (read error, wrong size, tool failure)."""


def drop_caches():
    """Writes dirty pages back and drops the kernel page, dentry and inode caches (needs root).

    Returns the seconds it took (not part of any measurement).
    """
    t0 = time.monotonic()
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    return time.monotonic() - t0


def _run_parallel(n_items, readers, read_one):
    """Runs read_one(i) for i in [0, n_items) on `readers` threads pulling from a shared cursor.

    Returns (seconds, total bytes). Timing starts when all threads are released together and ends
    when the last one finishes; the first error stops every thread and is raised.
    """
    cursor = iter(range(n_items))  # next() on a range iterator is atomic under the GIL.
    cursor_lock = threading.Lock()
    totals = [0] * readers
    errors = []
    start = threading.Barrier(readers + 1)

    def worker(slot):
        try:
            start.wait()
            while not errors:
                with cursor_lock:
                    i = next(cursor, None)
                if i is None:
                    return
                totals[slot] += read_one(i)
        except Exception as e:  # noqa: BLE001 - carried to the caller.
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(readers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise WorkloadError(str(errors[0])) from errors[0]
    return seconds, sum(totals)


def file_epoch(paths, sizes, readers, bufsize=MIB):
    """Reads every file once, whole, with `readers` parallel readers, in the given order.

    Each reader opens the file, reads it with `bufsize` reads into a reused buffer and closes it.
    """
    bufs = {}

    def read_one(i):
        buf = bufs.get(threading.get_ident())
        if buf is None:
            buf = bufs[threading.get_ident()] = memoryview(bytearray(bufsize))
        fd = os.open(paths[i], os.O_RDONLY)
        try:
            n = 0
            while True:
                k = os.readv(fd, [buf])
                if k == 0:
                    break
                n += k
        finally:
            os.close(fd)
        if n != sizes[i]:
            raise WorkloadError(f"{paths[i]}: read {n} bytes, expected {sizes[i]}")
        return n

    seconds, total = _run_parallel(len(paths), readers, read_one)
    return {"seconds": seconds, "bytes": total, "files": len(paths), "readers": readers,
            "MBps": total / seconds / 1e6, "files_per_s": len(paths) / seconds}


class S3Reader:
    """Direct GETs from the S3 endpoint with boto3: the no-cache baseline."""

    def __init__(self, endpoint, bucket, access_key, secret_key, max_connections):
        import boto3  # Imported here so --systems without `direct` does not need it.
        from botocore.config import Config
        self.bucket = bucket
        self.client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=access_key,
            aws_secret_access_key=secret_key, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, max_pool_connections=max_connections,
                          retries={"max_attempts": 1}))

    def get(self, key, chunk=MIB):
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        n = 0
        while True:
            b = body.read(chunk)
            if not b:
                break
            n += len(b)
        body.close()
        return n

    def put_file(self, key, path):
        with open(path, "rb") as f:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=f)


def s3_epoch(reader, keys, sizes, readers):
    """GETs every object once, whole, with `readers` parallel GETs (one connection each)."""

    def read_one(i):
        n = reader.get(keys[i])
        if n != sizes[i]:
            raise WorkloadError(f"s3://{reader.bucket}/{keys[i]}: got {n} bytes, expected "
                                f"{sizes[i]}")
        return n

    seconds, total = _run_parallel(len(keys), readers, read_one)
    return {"seconds": seconds, "bytes": total, "files": len(keys), "readers": readers,
            "MBps": total / seconds / 1e6, "files_per_s": len(keys) / seconds}


def curl_epoch(endpoint, bucket, access_key, secret_key, keys, sizes, readers, config_path):
    """GETs every object once with one native curl process: sequential over one kept-alive
    connection for 1 reader, `--parallel --parallel-max N` (N connections) otherwise. SigV4-signed
    like a real client. The strongest no-cache baseline: no Python on the data path."""
    with open(config_path, "w") as f:
        for k in keys:
            f.write(f'url = "{endpoint}/{bucket}/{k}"\noutput = "/dev/null"\n')
    cmd = ["curl", "--silent", "--show-error", "--no-progress-meter", "--fail",
           "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{access_key}:{secret_key}",
           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
           "--write-out", "%{http_code} %{size_download} %{url_effective}\\n", "--config",
           config_path]
    if readers > 1:
        cmd += ["--parallel", "--parallel-max", str(readers), "--parallel-immediate"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=False)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise WorkloadError(f"curl exited {p.returncode}: {p.stderr.strip()[-300:]}")
    expected = {f"{endpoint}/{bucket}/{k}": n for k, n in zip(keys, sizes)}
    total = 0
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        code, n, url = parts[0], int(parts[1]), parts[2]
        if code != "200" or expected.pop(url, None) != n:
            raise WorkloadError(f"curl: {url}: HTTP {code}, {n} bytes")
        total += n
    if expected:
        raise WorkloadError(f"curl: {len(expected)} objects not fetched, e.g. {next(iter(expected))}")
    return {"seconds": seconds, "bytes": total, "files": len(keys), "readers": readers,
            "MBps": total / seconds / 1e6, "files_per_s": len(keys) / seconds,
            "client": "curl"}


def fio_command(path, runtime_s):
    return ["fio", "--name=randread4k", f"--filename={path}", "--readonly", "--direct=1",
            "--rw=randread", "--bs=4k", "--numjobs=1", "--iodepth=1", "--ioengine=psync",
            "--time_based", f"--runtime={runtime_s}", "--invalidate=0", "--output-format=json"]


def fio_randread(path, runtime_s):
    """4 KiB O_DIRECT random reads at queue depth 1 over `path`; IOPS and completion latency."""
    cmd = fio_command(path, runtime_s)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=runtime_s + 120, check=False)
    if p.returncode != 0:
        raise WorkloadError(f"fio exited {p.returncode}: {p.stderr.strip()[-500:]}")
    # fio may print notes before the JSON document.
    out = p.stdout[p.stdout.find("{"):]
    try:
        job = json.loads(out)["jobs"][0]
    except (ValueError, KeyError, IndexError) as e:
        raise WorkloadError(f"cannot parse fio output: {e}: {p.stdout[:300]}") from e
    rd = job["read"]
    if job.get("error", 0) != 0 or rd["io_bytes"] == 0:
        raise WorkloadError(f"fio reported error {job.get('error')} after {rd['io_bytes']} bytes")
    pct = rd["clat_ns"].get("percentile", {})
    return {"iops": rd["iops"], "io_bytes": rd["io_bytes"], "runtime_ms": rd["runtime"],
            "clat_mean_us": rd["clat_ns"]["mean"] / 1e3,
            "clat_p50_us": pct.get("50.000000", 0) / 1e3,
            "clat_p99_us": pct.get("99.000000", 0) / 1e3,
            "clat_p999_us": pct.get("99.900000", 0) / 1e3,
            "command": " ".join(cmd)}


class DataLoaderBench:
    """A PyTorch DataLoader over the 1 MiB files: a Dataset that opens and reads one file per
    sample, num_workers=2, batch 16, shuffle=True, persistent workers (so worker start-up is paid
    once, in an untimed priming epoch, not in each timed epoch)."""

    def __init__(self, paths, size, num_workers=2, batch_size=16, seed=1234):
        import torch  # Slow import: only when a DataLoader workload runs.
        torch.set_num_threads(1)
        self.torch = torch
        self.n = len(paths)
        gen = torch.Generator()
        gen.manual_seed(seed)
        self.loader = torch.utils.data.DataLoader(
            _FileDataset(paths, size), batch_size=batch_size, shuffle=True,
            num_workers=num_workers, persistent_workers=True, generator=gen, timeout=300)

    def epoch(self):
        t0 = time.perf_counter()
        samples = 0
        nbytes = 0
        for batch in self.loader:
            samples += batch.shape[0]
            nbytes += batch.numel()
        seconds = time.perf_counter() - t0
        if samples != self.n:
            raise WorkloadError(f"DataLoader epoch yielded {samples} samples, expected {self.n}")
        return {"seconds": seconds, "samples": samples, "bytes": nbytes,
                "samples_per_s": samples / seconds, "MBps": nbytes / seconds / 1e6}

    def close(self):
        # Ends the persistent workers now rather than at interpreter exit.
        it = getattr(self.loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()
        self.loader = None


class _FileDataset:
    """Map-style dataset: sample i is the whole content of file i as a uint8 tensor."""

    def __init__(self, paths, size):
        self.paths = paths
        self.size = size

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import torch
        buf = bytearray(self.size)
        view = memoryview(buf)
        n = 0
        with open(self.paths[i], "rb", buffering=0) as f:
            while n < self.size:
                k = f.readinto(view[n:])
                if not k:
                    break
                n += k
            if n != self.size or f.read(1):
                raise WorkloadError(f"{self.paths[i]}: not {self.size} bytes")
        return torch.frombuffer(buf, dtype=torch.uint8)
