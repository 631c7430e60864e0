#!/usr/bin/python3
"""What a write-through close costs against the lake's own floor: N files of SIZE MiB written
through a `cairn up --write-mode through` mount (open, 1 MiB write(2)s, close: the close returns
once the object is in the lake), against the same bytes sent straight to the lake with boto3 as
one PUT, as a two-part multipart upload (parts in parallel, then the completion), and as 8
PUTs at a time. With --floor-mib, also the lake's floor for one large object: a multipart upload
of 8 MiB parts, 4 in flight (what a write-through close of a file that size waits for at best),
its completion timed apart, and one PUT of it.

The lake is s3rver on this machine (--lake radosgw: a radosgw, tests/radosgw/radosgw.sh). Needs root (FUSE), the release build and python3-boto3:

    /usr/bin/python3 bench/write_through_close.py [--files 20] [--size-mib 10] [--floor-mib 1024]
        [--lake s3rver|radosgw]

docs/benchmarks.md ("One request for a file that ends small") has a recorded run.
"""
import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, BENCH_DIR)

from conftest import S3_BUCKET, Harness, S3Server  # noqa: E402
from radosgw_lake import start_radosgw  # noqa: E402
from write_bench import start_s3rver  # noqa: E402

MiB = 1 << 20


def ms(values):
    return f"{statistics.median(values) * 1000:.1f} ms"


def cairn_closes(harness, s3, work, files, data):
    up = harness.up(f"s3://{S3_BUCKET}/through", s3=s3, metrics=False,
                    cache_dir=os.path.join(work, "cache"), cache_size="4GiB",
                    extra=["--write-mode", "through"], name="up")
    folder = os.path.join(up.mountpoint, "closes")
    os.makedirs(folder, exist_ok=True)
    writes, closes = [], []
    for i in range(files):
        f = open(os.path.join(folder, f"f{i}.bin"), "wb", buffering=0)
        start = time.perf_counter()
        for off in range(0, len(data), MiB):
            f.write(data[off:off + MiB])
        written = time.perf_counter()
        f.close()
        writes.append(written - start)
        closes.append(time.perf_counter() - written)
    print(f"cairn write-through, {len(data) // MiB} MiB files: write {ms(writes)}, "
          f"close {ms(closes)} (medians of {files})")
    up.stop()


def direct(client, files, data):
    puts = []
    for i in range(files):
        start = time.perf_counter()
        client.put_object(Bucket=S3_BUCKET, Key=f"direct/put{i}", Body=data)
        puts.append(time.perf_counter() - start)
    half = len(data) // 2
    parts, completes = [], []
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for i in range(files):
            key = f"direct/mp{i}"
            start = time.perf_counter()
            upload = client.create_multipart_upload(Bucket=S3_BUCKET, Key=key)["UploadId"]
            bodies = [data[:half], data[half:]]
            etags = list(pool.map(
                lambda n: client.upload_part(Bucket=S3_BUCKET, Key=key, UploadId=upload,
                                             PartNumber=n + 1, Body=bodies[n])["ETag"],
                range(2)))
            sent = time.perf_counter()
            client.complete_multipart_upload(
                Bucket=S3_BUCKET, Key=key, UploadId=upload,
                MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e}
                                           for n, e in enumerate(etags)]})
            parts.append(sent - start)
            completes.append(time.perf_counter() - sent)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.put_object(Bucket=S3_BUCKET, Key=f"direct/par{i}",
                                                  Body=data), range(files)))
    parallel = (time.perf_counter() - start) / files
    print(f"boto3: one PUT {ms(puts)}; two parts in parallel {ms(parts)} + completion "
          f"{ms(completes)}; 8 PUTs at a time {parallel * 1000:.1f} ms a file")


def floor(client, size_mib):
    part = os.urandom(8 * MiB)
    count = size_mib // 8
    key = "floor/multipart"
    start = time.perf_counter()
    upload = client.create_multipart_upload(Bucket=S3_BUCKET, Key=key)["UploadId"]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        etags = list(pool.map(
            lambda n: client.upload_part(Bucket=S3_BUCKET, Key=key, UploadId=upload,
                                         PartNumber=n, Body=part)["ETag"], range(1, count + 1)))
    sent = time.perf_counter()
    client.complete_multipart_upload(
        Bucket=S3_BUCKET, Key=key, UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e}
                                   for n, e in enumerate(etags)]})
    done = time.perf_counter()
    body = part * count
    start_put = time.perf_counter()
    client.put_object(Bucket=S3_BUCKET, Key="floor/put", Body=body)
    put = time.perf_counter() - start_put
    print(f"lake floor, {count * 8} MiB: multipart of 8 MiB parts, 4 in flight: parts "
          f"{sent - start:.2f} s + completion {done - sent:.2f} s = {done - start:.2f} s; "
          f"one PUT {put:.2f} s")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(REPO, "build", "cairn"))
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--size-mib", type=int, default=10)
    p.add_argument("--floor-mib", type=int, default=0)
    p.add_argument("--lake", choices=("s3rver", "radosgw"), default="s3rver",
                   help="radosgw: tests/radosgw/radosgw.sh, objects in RAM (--lake-gib)")
    p.add_argument("--lake-gib", type=int, default=6)
    args = p.parse_args(argv)
    import boto3
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin} missing: build it (scripts/build.sh release)")
    data = os.urandom(args.size_mib * MiB)
    with tempfile.TemporaryDirectory(prefix="cairn-close-", dir="/var/tmp") as work:
        harness = Harness(args.bin, work)
        proc = None
        try:
            if args.lake == "radosgw":
                proc, port = start_radosgw(work, args.lake_gib << 30)
            else:
                proc, port = start_s3rver(work)
            s3 = S3Server(port, proc)
            cairn_closes(harness, s3, work, args.files, data)
            client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                                  aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                                  region_name="us-east-1")
            direct(client, args.files, data)
            if args.floor_mib:
                floor(client, args.floor_mib)
        finally:
            errors = harness.cleanup()
            if proc is not None:
                proc.stop()
            if errors:
                print("\n".join(errors), file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
