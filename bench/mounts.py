"""s3fs and rclone mounts of an s3rver bucket, for the benchmarks that compare Cairn with them
(checkpoint_bench.py, au_bench.py; read_bench.py has its own, restartable ones in readbench/).
Each returns (daemon, mountpoint); the daemon's stop() unmounts."""
import os

from conftest import S3_BUCKET, S3_KEY, S3_SECRET
from readbench import procs
from readbench.systems import rclone_env, write_rclone_config, write_s3fs_passwd

MOUNT_TIMEOUT_S = 60


def mount_s3fs(work, port, prefix, read_only=False):
    """s3fs over s3://S3_BUCKET/prefix with its local file cache (use_cache)."""
    mnt = os.path.join(work, "mnt-s3fs")
    os.makedirs(mnt, exist_ok=True)
    passwd = os.path.join(work, "s3fs.passwd")
    write_s3fs_passwd(passwd, S3_KEY, S3_SECRET)
    opts = (f"url=http://127.0.0.1:{port},use_path_request_style,passwd_file={passwd},"
            f"use_cache={os.path.join(work, 'cache-s3fs')}" + (",ro" if read_only else ""))
    daemon = procs.Daemon("s3fs", ["s3fs", f"{S3_BUCKET}:/{prefix.strip('/')}", mnt, "-f", "-o",
                                   opts], os.path.join(work, "s3fs.log"), mountpoint=mnt).start()
    daemon.wait_ready(lambda: procs.is_mounted(mnt), MOUNT_TIMEOUT_S, "mounted")
    return daemon, mnt


def mount_rclone(work, port, prefix, cache_mode="full", read_only=False):
    """rclone mount over s3://S3_BUCKET/prefix, --vfs-cache-mode `cache_mode`; written files go
    up as soon as they are closed (--vfs-write-back 0s)."""
    mnt = os.path.join(work, "mnt-rclone")
    os.makedirs(mnt, exist_ok=True)
    conf = os.path.join(work, "rclone.conf")
    write_rclone_config(conf, f"http://127.0.0.1:{port}", S3_KEY, S3_SECRET)
    env = rclone_env()
    argv = ["rclone", "--config", conf, "mount", f"bench:{S3_BUCKET}/{prefix.strip('/')}", mnt,
            "--vfs-cache-mode", cache_mode, "--vfs-write-back", "0s",
            "--cache-dir", os.path.join(work, "cache-rclone")]
    if read_only:
        argv.append("--read-only")
    daemon = procs.Daemon("rclone", argv, os.path.join(work, "rclone.log"), env=env,
                          mountpoint=mnt).start()
    daemon.wait_ready(lambda: procs.is_mounted(mnt), MOUNT_TIMEOUT_S, "mounted")
    return daemon, mnt
