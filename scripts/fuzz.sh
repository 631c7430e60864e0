#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/; clang + ASan + UBSan, in build-asan next to the
# sanitizer unit tests) and runs each one for SECONDS (default 20) over its checked-in corpus
# (fuzz/corpus/<name>/, replayed first).
# New inputs go to a temporary folder, so the checked-in corpus only changes by hand. A crash,
# leak, sanitizer report or timeout fails the script; the reproducer is left in build-asan/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
scripts/build.sh fuzz >/dev/null
status=0
for bin in build-asan/fuzz/*_fuzz; do
  name="$(basename "$bin" _fuzz)"
  corpus="fuzz/corpus/$name"
  work="$(mktemp -d)"
  echo "==> fuzz $name (${seconds}s, corpus $corpus)"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=0 -artifact_prefix="build-asan/$name-" "$work" "$corpus" \
      >"build-asan/$name.log" 2>&1; then
    echo "FAILED: fuzz $name (see build-asan/$name.log)" >&2
    tail -40 "build-asan/$name.log" >&2
    status=1
  else
    grep -E '^#[0-9]+.*DONE|Done [0-9]+ runs' "build-asan/$name.log" | tail -1 || true
  fi
  rm -rf "$work"
done
exit $status
