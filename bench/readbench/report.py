"""Turns raw runs into medians, the side-by-side table, ratios against same-run baselines and the
PASS/MISS verdict for each target of the issue."""
import statistics

SYSTEM_ORDER = ("cairn", "s3fs", "rclone", "direct", "local")

# (label, workload, state, metric, unit). state None: the workload has a single result dict.
ROWS = [
    ("1 MiB x1 reader   cold", "small_x1", "cold", "MBps", "MB/s"),
    ("                  cold", "small_x1", "cold", "files_per_s", "files/s"),
    ("1 MiB x1 reader   warm", "small_x1", "warm", "MBps", "MB/s"),
    ("                  warm", "small_x1", "warm", "files_per_s", "files/s"),
    ("1 MiB x1 reader   hot", "small_x1", "hot", "MBps", "MB/s"),
    ("1 MiB x8 readers  cold", "small_x8", "cold", "MBps", "MB/s"),
    ("                  cold", "small_x8", "cold", "files_per_s", "files/s"),
    ("1 MiB x8 readers  warm", "small_x8", "warm", "MBps", "MB/s"),
    ("                  warm", "small_x8", "warm", "files_per_s", "files/s"),
    ("1 MiB x8 readers  hot", "small_x8", "hot", "MBps", "MB/s"),
    ("256 MiB x1 reader cold", "large_x1", "cold", "MBps", "MB/s"),
    ("256 MiB x1 reader warm", "large_x1", "warm", "MBps", "MB/s"),
    ("256 MiB x1 reader hot", "large_x1", "hot", "MBps", "MB/s"),
    ("256 MiB x8 readers cold", "large_x8", "cold", "MBps", "MB/s"),
    ("256 MiB x8 readers warm", "large_x8", "warm", "MBps", "MB/s"),
    ("256 MiB x8 readers hot", "large_x8", "hot", "MBps", "MB/s"),
    ("4 KiB randread QD1", "fio", None, "iops", "IOPS"),
    ("              p50", "fio", None, "clat_p50_us", "us"),
    ("              p99", "fio", None, "clat_p99_us", "us"),
    ("DataLoader 2 workers warm", "dataloader", "warm", "samples_per_s", "samples/s"),
]

# Rows that get a ratio line: throughput-like, higher is better.
RATIO_ROWS = [r for r in ROWS if r[4] in ("MB/s", "IOPS", "samples/s")]


def median_of(runs, metric):
    vals = [r[metric] for r in runs if r and metric in r]
    return statistics.median(vals) if vals else None


def value(results, system, workload, state, metric):
    """Median of `metric` over the runs of (system, workload, state), or None if not measured."""
    w = results.get(system, {}).get("workloads", {}).get(workload)
    if not w:
        return None
    if state is None:
        return w.get(metric) if isinstance(w, dict) else None
    runs = w.get(state)
    if runs is None:
        return None
    if isinstance(runs, dict):
        runs = [runs]
    return median_of(runs, metric)


def fmt(v, unit=""):
    if v is None:
        return "-"
    if unit == "us" or abs(v) < 10:
        return f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"
    return f"{v:,.0f}"


def summary(results):
    """{system: {"workload.state.metric": median}} for every table row."""
    out = {}
    for s in results:
        out[s] = {}
        for _, w, st, m, _ in ROWS:
            out[s][f"{w}.{st}.{m}" if st else f"{w}.{m}"] = value(results, s, w, st, m)
    return out


def table(results, repeats):
    systems = [s for s in SYSTEM_ORDER if s in results]
    lines = []
    head = f"{'workload':<27}{'unit':<10}" + "".join(f"{s:>11}" for s in systems)
    lines.append(head)
    lines.append("-" * len(head))
    for label, w, st, m, unit in ROWS:
        cells = [value(results, s, w, st, m) for s in systems]
        if all(c is None for c in cells):
            continue
        lines.append(f"{label:<27}{unit:<10}" + "".join(f"{fmt(c, unit):>11}" for c in cells))
    lines.append("")
    lines.append("cold: empty system cache (fresh cache folder, new daemon) and kernel page cache "
                 "dropped; one run.")
    lines.append(f"warm: second and later epochs, kernel page cache dropped before each, so the "
                 f"system's own cache is measured, not the kernel's; median of {repeats}.")
    lines.append(f"hot: kernel page cache kept (not dropped) after a warm epoch; median of "
                 f"{repeats}. MB/s = 10^6 bytes/s.")
    lines.append("direct: GETs straight from s3rver with the same parallelism, no cache (cold "
                 "only). local: the same files on local disk (its cold = warm = disk reads).")
    return "\n".join(lines)


def _ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def ratios(results):
    """Cairn / baseline for each throughput row, measured in this run."""
    lines = []
    if "cairn" not in results:
        return "(cairn not run: no ratios)", {}
    cols = [("s3fs", "s3fs"), ("rclone", "rclone"), ("local", "local"), ("direct", "direct")]
    cols = [c for c in cols if c[0] in results]
    head = f"{'Cairn / baseline':<27}{'unit':<10}" + "".join(f"{'/' + c[1]:>11}" for c in cols)
    lines.append(head)
    lines.append("-" * len(head))
    data = {}
    for label, w, st, m, unit in RATIO_ROWS:
        c = value(results, "cairn", w, st, m)
        cells = []
        for base, _ in cols:
            r = _ratio(c, value(results, base, w, st, m))
            cells.append(r)
            data[f"{w}.{st}.{m}/{base}"] = r
        if all(x is None for x in cells):
            continue
        lines.append(f"{label:<27}{unit:<10}" +
                     "".join(f"{(f'{x:.2f}x' if x is not None else '-'):>11}" for x in cells))
    warm = value(results, "cairn", "large_x1", "warm", "MBps")
    hot = value(results, "local", "large_x1", "hot", "MBps")
    r = _ratio(warm, hot)
    data["large_x1.warm.MBps/local.hot"] = r
    hot_c = value(results, "cairn", "large_x1", "hot", "MBps")
    r2 = _ratio(hot_c, hot)
    data["large_x1.hot.MBps/local.hot"] = r2
    lines.append("")
    lines.append(f"256 MiB Cairn warm / local-disk page-cache-hot: "
                 f"{(f'{r:.2f}x' if r is not None else '-')}; Cairn hot / local hot: "
                 f"{(f'{r2:.2f}x' if r2 is not None else '-')}")
    return "\n".join(lines), data


def _target_ratio(results, name, w, st, m, base, base_state, factor):
    c = value(results, "cairn", w, st, m)
    b = value(results, base, w, base_state, m)
    if c is None or b is None:
        missing = "cairn" if c is None else base
        failed = missing in results and results[missing].get("errors")
        return {"target": name, "verdict": "ERROR" if failed else "SKIP",
                "detail": f"{missing} {'failed' if failed else 'not measured'}"}
    r = c / b if b else float("inf")
    return {"target": name, "verdict": "PASS" if r >= factor else "MISS", "ratio": r,
            "cairn": c, "baseline": b,
            "detail": f"{r:.2f}x (cairn {fmt(c)}, {base} {fmt(b)})"}


def _cpu_per_mb(results, system, workload, state):
    """Median daemon CPU ms per MB read over the runs of (system, workload, state), or None."""
    runs = results.get(system, {}).get("workloads", {}).get(workload, {}).get(state)
    runs = [runs] if isinstance(runs, dict) else (runs or [])
    per = [r["daemon_cpu_s"] * 1e3 / (r["bytes"] / 1e6) for r in runs
           if r.get("daemon_cpu_s") is not None and r.get("bytes")]
    return statistics.median(per) if per else None


def _fio_targets(results):
    p50 = value(results, "cairn", "fio", None, "clat_p50_us")
    p99 = value(results, "cairn", "fio", None, "clat_p99_us")
    s3fs_p50 = value(results, "s3fs", "fio", None, "clat_p50_us")
    if p50 is None:
        failed = "cairn" in results and results["cairn"].get("errors")
        skip = {"verdict": "ERROR" if failed else "SKIP",
                "detail": "cairn fio " + ("failed" if failed else "not measured")}
        return [dict(skip, target="4 KiB random read p50 <= s3fs p50"),
                dict(skip, target="4 KiB random read p99 < 150 us")]
    out = []
    if s3fs_p50 is None:
        out.append({"target": "4 KiB random read p50 <= s3fs p50", "verdict": "SKIP",
                    "detail": "s3fs fio not measured"})
    else:
        out.append({"target": "4 KiB random read p50 <= s3fs p50",
                    "verdict": "PASS" if p50 <= s3fs_p50 else "MISS", "cairn": p50,
                    "baseline": s3fs_p50,
                    "detail": f"p50 {p50:.1f} us, s3fs {s3fs_p50:.1f} us"})
    out.append({"target": "4 KiB random read p99 < 150 us",
                "verdict": "PASS" if p99 is not None and p99 < 150 else "MISS", "cairn": p99,
                "detail": f"p99 {fmt(p99, 'us')} us"})
    return out


def _cpu_target(results):
    """Daemon CPU per MB no higher than s3fs's on every workload and state both measured."""
    worse, compared = [], 0
    for _, w, st, _, unit in ROWS:
        if unit != "MB/s" or st is None:
            continue
        c, b = _cpu_per_mb(results, "cairn", w, st), _cpu_per_mb(results, "s3fs", w, st)
        if c is None or b is None:
            continue
        compared += 1
        if c > b:
            worse.append(f"{w} {st} {c:.2f} vs {b:.2f}")
    name = "daemon CPU per MB <= s3fs on every workload"
    if compared == 0:
        return {"target": name, "verdict": "SKIP", "detail": "not measured"}
    return {"target": name, "verdict": "MISS" if worse else "PASS",
            "detail": ("over s3fs: " + "; ".join(worse)) if worse
            else f"{compared} workloads compared"}


def targets(results):
    """The targets of issue 8 (read path v2) that this benchmark measures."""
    t = [
        _target_ratio(results, "256 MiB warm, 1 reader >= 1.5x s3fs",
                      "large_x1", "warm", "MBps", "s3fs", "warm", 1.5),
        _target_ratio(results, "256 MiB warm, 1 reader >= 0.9x local disk",
                      "large_x1", "warm", "MBps", "local", "warm", 0.9),
        _target_ratio(results, "256 MiB hot, 1 reader >= 0.9x local hot",
                      "large_x1", "hot", "MBps", "local", "hot", 0.9),
        _target_ratio(results, "256 MiB warm, 8 readers >= 0.9x local disk",
                      "large_x8", "warm", "MBps", "local", "warm", 0.9),
        _target_ratio(results, "1 MiB warm, 8 readers >= 3x s3fs",
                      "small_x8", "warm", "MBps", "s3fs", "warm", 3.0),
        _target_ratio(results, "1 MiB warm, 8 readers >= 3x rclone",
                      "small_x8", "warm", "MBps", "rclone", "warm", 3.0),
        _target_ratio(results, "1 MiB warm, 8 readers >= 0.95x local disk",
                      "small_x8", "warm", "MBps", "local", "warm", 0.95),
        _target_ratio(results, "DataLoader warm >= 0.9x local disk",
                      "dataloader", "warm", "samples_per_s", "local", "warm", 0.9),
        _target_ratio(results, "DataLoader warm >= 4x s3fs",
                      "dataloader", "warm", "samples_per_s", "s3fs", "warm", 4.0),
        _target_ratio(results, "cold 1 MiB x1 reader >= direct GETs x1",
                      "small_x1", "cold", "MBps", "direct", "cold", 1.0),
        _target_ratio(results, "cold 1 MiB x8 readers >= direct GETs x8",
                      "small_x8", "cold", "MBps", "direct", "cold", 1.0),
        _target_ratio(results, "cold 256 MiB x1 reader >= direct GET x1",
                      "large_x1", "cold", "MBps", "direct", "cold", 1.0),
        _target_ratio(results, "cold 256 MiB x8 readers >= direct GETs x8",
                      "large_x8", "cold", "MBps", "direct", "cold", 1.0),
    ]
    t += _fio_targets(results)
    t.append(_cpu_target(results))
    return t


def targets_text(tlist):
    w = max(len(t["target"]) for t in tlist)
    return "\n".join(f"[{t['verdict']}] {t['target']:<{w}}  {t['detail']}" for t in tlist)


def cost_text(results):
    """Daemon CPU per MB read and Cairn's cache counters per phase: where the time goes."""
    lines = [f"{'daemon CPU ms per MB read':<27}{'':<10}" +
             "".join(f"{s:>11}" for s in SYSTEM_ORDER if s in results and s in
                     ("cairn", "s3fs", "rclone"))]
    fs = [s for s in ("cairn", "s3fs", "rclone") if s in results]
    if not fs:
        return ""
    for label, w, st, _, unit in ROWS:
        if unit != "MB/s" or st is None:
            continue
        cells = []
        for s in fs:
            runs = results[s].get("workloads", {}).get(w, {}).get(st)
            runs = [runs] if isinstance(runs, dict) else (runs or [])
            per = [r["daemon_cpu_s"] * 1e3 / (r["bytes"] / 1e6) for r in runs
                   if r.get("daemon_cpu_s") is not None and r.get("bytes")]
            cells.append(statistics.median(per) if per else None)
        if all(c is None for c in cells):
            continue
        lines.append(f"{label.strip():<27}{'ms/MB':<10}" +
                     "".join(f"{(f'{c:.2f}' if c is not None else '-'):>11}" for c in cells))
    return "\n".join(lines)
