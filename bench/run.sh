#!/usr/bin/env bash
# Runs the Cairn read benchmark (see docs/benchmarks.md). Needs root: it drops the page cache.
#   bench/run.sh --quick                       # small dataset, for development
#   bench/run.sh                               # full: 1000 x 1 MiB + 4 x 256 MiB
#   bench/run.sh --systems cairn,s3fs,local    # a subset
# Debian's interpreter on purpose: python3-torch and python3-boto3 are installed for it.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/read_bench.py" "$@"
