#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang + ASan + UBSan, in build-fuzz) and runs each one
# for SECONDS (default 20) over its checked-in corpus (fuzz/corpus/<name>/, replayed first).
# New inputs go to a temporary folder, so the checked-in corpus only changes by hand. A crash,
# leak, sanitizer report or timeout fails the script; the reproducer is left in build-fuzz/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
scripts/build.sh fuzz >/dev/null
status=0
for bin in build-fuzz/fuzz/*_fuzz; do
  name="$(basename "$bin" _fuzz)"
  corpus="fuzz/corpus/$name"
  work="$(mktemp -d)"
  echo "==> fuzz $name (${seconds}s, corpus $corpus)"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=0 -artifact_prefix="build-fuzz/$name-" "$work" "$corpus" \
      >"build-fuzz/$name.log" 2>&1; then
    echo "FAILED: fuzz $name (see build-fuzz/$name.log)" >&2
    tail -40 "build-fuzz/$name.log" >&2
    status=1
  else
    grep -E '^#[0-9]+.*DONE|Done [0-9]+ runs' "build-fuzz/$name.log" | tail -1 || true
  fi
  rm -rf "$work"
done
exit $status
