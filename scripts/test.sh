#!/usr/bin/env bash
# README command 2: sets everything up and runs every test suite:
#   1. unit tests (GoogleTest, ctest label "unit"),
#   2. integration tests that start real processes: s3rver, FUSE mounts, workers (ctest label
#      "integration" and the pytest suite in tests/),
#   3. the unit tests again under ASan+UBSan, then a clang tree: every library with
#      -Wthread-safety -Werror, and the unit tests of the concurrent modules under
#      ThreadSanitizer; then each fuzz harness for a short run over its corpus (fuzz/)
#      (skip all of step 3 with CAIRN_SKIP_SANITIZERS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release

status=0
run() {
  echo "==> $*"
  if ! "$@"; then
    echo "FAILED: $*" >&2
    status=1
  fi
}

run scripts/check-format.sh
run ctest --test-dir build -L unit --output-on-failure -j 2 --timeout 300
run ctest --test-dir build -L integration --output-on-failure -j 1 --timeout 600
run /usr/bin/python3 -m pytest -v -p no:cacheprovider tests/ --cairn-bin="$PWD/build/cairn"
if [[ "${CAIRN_SKIP_SANITIZERS:-0}" != 1 ]]; then
  run scripts/build.sh asan
  run env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -L unit --output-on-failure -j 2 --timeout 600
  # The clang tree: cairn_cli and cairn_fuse pull in every library (thread-safety analysis);
  # the tests are those of the modules where threads meet.
  run scripts/build.sh tsan cairn_cli cairn_fuse common_test net_test pagestore_test \
    membership_test worker_test client_test transport_test
  run env TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
    ctest --test-dir build-tsan -L unit --output-on-failure -j 2 --timeout 600
  run scripts/fuzz.sh "${CAIRN_FUZZ_SECONDS:-20}"
fi
if ((status)); then echo "SOME TESTS FAILED"; else echo "ALL TESTS PASSED"; fi
exit $status
