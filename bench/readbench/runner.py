"""The frame every benchmark script shares: signals, failure report, clean-up, summary, JSON.

A benchmark's main() parses its flags, makes its workdir and its bench object, then hands the
rest to run(): the measured body, the report and where the raw numbers go.
"""
import datetime
import json
import os
import shutil
import signal
import sys
import tempfile
import time

RESULTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


def log(msg=""):
    print(msg, flush=True)


def _exit_on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def make_workdir(args, prefix):
    """A fresh workdir under args.workdir_base, or None (after saying why) if args.cairn_bin is
    not an executable."""
    if not os.access(args.cairn_bin, os.X_OK):
        log(f"{args.cairn_bin} is not executable")
        return None
    return tempfile.mkdtemp(prefix=prefix, dir=args.workdir_base)


def run(name, args, workdir, bench, body, report, info, procs, results, extra=None):
    """Runs body() and returns the exit code: 0, or 1 if it raised (the error and the last log
    lines of every process procs() returns are printed; partial results are kept).

    SIGTERM, SIGHUP and SIGINT end the run through the same clean-up: bench.cleanup(), then the
    workdir is removed unless args.keep_workdir. Then the lines report() returns are printed and
    everything goes to args.out (default bench/results/<name>-<start time>.json): the command,
    the flags, `info` (the machine, with the load average at the end added), results(), the
    summary lines and the extra() fields, if any."""
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, _exit_on_signal)
    started = datetime.datetime.now()
    t0 = time.monotonic()
    rc = 0
    try:
        body()
    except Exception as e:  # Reported; partial results kept.
        log(f"FAILED: {e!r}")
        for p in procs():
            log(f"--- {p.name}:\n{p.log_tail(15)}")
        rc = 1
    finally:
        bench.cleanup()
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    info["loadavg_end"] = os.getloadavg()
    lines = report()
    log("")
    for line in lines:
        log(line)
    out = args.out or os.path.join(RESULTS_DIR,
                                   f"{name}-{started.strftime('%Y%m%d-%H%M%S')}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    doc = {"command": " ".join([sys.executable, *sys.argv]), "started": started.isoformat(),
           "wall_seconds": time.monotonic() - t0, "config": vars(args), "machine": info,
           "results": results(), "summary": lines, "ok": rc == 0}
    doc.update(extra() if extra else {})
    with open(out, "w") as f:
        json.dump(doc, f, indent=2, default=str)
    log(f"\nJSON: {out}")
    return rc
