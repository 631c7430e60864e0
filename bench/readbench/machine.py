"""What the numbers were measured on: CPU, memory, kernel, disk, tool versions, load."""
import datetime
import os
import platform
import shutil
import subprocess


def _first_line(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=10, check=False)
        return p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _meminfo(field):
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _fs_of(path):
    line = _first_line(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "-T", path])
    return line or "unknown"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[:3]
    except OSError:
        return []


def info(workdir, repo, cairn_bin):
    du = shutil.disk_usage(workdir)
    build_type = ""
    cache = os.path.join(os.path.dirname(cairn_bin), "CMakeCache.txt")
    try:
        with open(cache) as f:
            for line in f:
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    build_type = line.split("=", 1)[1].strip()
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "nproc_available": len(os.sched_getaffinity(0)),
        "cpu_model": _cpu_model(),
        "mem_total_bytes": _meminfo("MemTotal"),
        "mem_available_bytes": _meminfo("MemAvailable"),
        "kernel": platform.release(),
        "os": _first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "workdir": workdir,
        "workdir_fs": _fs_of(workdir),
        "disk_free_bytes": du.free,
        "disk_total_bytes": du.total,
        "loadavg_start": loadavg(),
        "cairn_binary": cairn_bin,
        "cairn_build_type": build_type,
        # HEAD of the checkout when the run started; the binary may be older (see its mtime).
        "cairn_binary_mtime": (datetime.datetime.fromtimestamp(os.path.getmtime(cairn_bin))
                               .isoformat(timespec="seconds")
                               if os.path.exists(cairn_bin) else None),
        "cairn_git": _first_line(["git", "-C", repo, "rev-parse", "--short", "HEAD"]),
        "s3fs": _first_line(["s3fs", "--version"]),
        "rclone": _first_line(["rclone", "version"]),
        "fio": _first_line(["fio", "--version"]),
        "node": _first_line(["node", "--version"]),
        "python": platform.python_version(),
    }


def info_text(m):
    gib = 1 << 30
    return "\n".join([
        f"machine: {m['nproc']} CPUs ({m['nproc_available']} usable), {m['cpu_model']}",
        f"memory:  {m['mem_total_bytes'] / gib:.1f} GiB total, "
        f"{m['mem_available_bytes'] / gib:.1f} GiB available at start",
        f"kernel:  {m['kernel']} ({m['os']})",
        f"disk:    {m['workdir']} on {m['workdir_fs']}, {m['disk_free_bytes'] / gib:.1f} GiB free "
        f"of {m['disk_total_bytes'] / gib:.1f} GiB",
        f"load:    {' '.join(m['loadavg_start'])} (1/5/15 min) at start",
        f"cairn:   {m['cairn_binary']} ({m['cairn_build_type'] or 'build type unknown'}, "
        f"built {m['cairn_binary_mtime']}; checkout HEAD {m['cairn_git'] or '?'})",
        f"peers:   {m['s3fs'][:60]}; {m['rclone']}; {m['fio']}; node {m['node']}; "
        f"python {m['python']}",
    ])
