"""A radosgw lake for benchmarks (tests/radosgw/radosgw.sh: one mon, mgr and OSD on memstore, and
the gateway), for the numbers s3rver cannot give: radosgw completes a multipart upload without
copying its parts (s3rver rewrites every part into the final file), and runs its requests on
threads of its own. Its objects live in the OSD's RAM (`memstore_bytes`), and deleted objects
give it back after the gateway's garbage collection, which this set-up runs every few seconds.
"""
import os
import subprocess
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO, "tests"))

from conftest import S3_BUCKET, S3_KEY, S3_SECRET, free_port  # noqa: E402

SCRIPT = os.path.join(REPO, "tests", "radosgw", "radosgw.sh")

# Deleted objects' tails are collected within seconds instead of the default two hours, so a
# benchmark that deletes each run's objects does not fill the OSD's RAM.
GC_CONF = "\n".join(["rgw gc obj min wait = 0", "rgw gc processor period = 5",
                     "rgw gc processor max time = 5"])


class RadosgwLake:
    def __init__(self, folder, port):
        self.folder = folder
        self.port = port

    def stop(self):
        subprocess.run(["bash", SCRIPT, "stop", self.folder], check=False)


def start_radosgw(work, memstore_bytes):
    """Starts radosgw under `work`/radosgw with the tests' keys and S3_BUCKET; returns (lake,
    port). Raises CalledProcessError (with the script's output) if it does not come up."""
    folder = os.path.join(work, "radosgw")
    port = free_port()
    env = dict(os.environ, RADOSGW_MEMSTORE_BYTES=str(memstore_bytes), RADOSGW_EXTRA_CONF=GC_CONF)
    lake = RadosgwLake(folder, port)
    try:
        subprocess.run(["bash", SCRIPT, "start", folder, str(port), S3_KEY, S3_SECRET], env=env,
                       check=True, capture_output=True, text=True, timeout=180)
        subprocess.run(["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", f"{S3_KEY}:{S3_SECRET}",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        f"http://127.0.0.1:{port}/{S3_BUCKET}"], check=True, timeout=30)
    except Exception:
        lake.stop()
        raise
    return lake, port
