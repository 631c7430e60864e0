#!/usr/bin/env bash
# README command 2: sets everything up and runs every test suite:
#   1. unit tests (GoogleTest, ctest label "unit"),
#   2. integration tests that start real processes: s3rver, radosgw, FUSE mounts, workers (ctest
#      label "integration" and the pytest suite in tests/),
#   3. the unit tests again under ASan+UBSan, then a clang tree: every library with
#      -Wthread-safety -Werror, and the unit tests of the concurrent modules under
#      ThreadSanitizer; then each fuzz harness for a short run over its corpus (fuzz/)
#      (skip all of step 3 with CAIRN_SKIP_SANITIZERS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_start=$SECONDS
scripts/build.sh release
echo "<== release build took $((SECONDS - build_start)) s"
scripts/install-python.sh

status=0
failed_steps=()
run() {
  echo "==> $*"
  local start=$SECONDS
  if ! "$@"; then
    echo "FAILED: $*"
    status=1
    failed_steps+=("$*")
  fi
  echo "<== $1 took $((SECONDS - start)) s"
}
# The end of the output is what a CI summary shows: name every failed step and test there.
summarize() {
  echo "==> summary"
  local step
  for step in "${failed_steps[@]}"; do echo "FAILED STEP: $step"; done
  local tree
  for tree in build build-asan build-tsan; do
    local log="$tree/Testing/Temporary/LastTestsFailed.log"
    if [[ -s "$log" ]]; then sed "s|^|FAILED TEST ($tree): |" "$log"; fi
  done
  if [[ -s build/pytest-failures.txt ]]; then
    sed 's|^|FAILED TEST (pytest): |' build/pytest-failures.txt
  fi
}
# pytest, keeping the names of failed tests for the summary.
run_pytest() {
  local rc=0
  /usr/bin/python3 -m pytest -v -rfE -p no:cacheprovider tests/ --cairn-bin="$PWD/build/cairn" \
    2>&1 | tee build/pytest.log || rc=$?
  grep -E '^(FAILED|ERROR) ' build/pytest.log > build/pytest-failures.txt || true
  return "$rc"
}
rm -f build*/Testing/Temporary/LastTestsFailed.log build/pytest-failures.txt

run scripts/check-format.sh
run ctest --test-dir build -L unit --output-on-failure -j 2 --timeout 300
run ctest --test-dir build -L integration --output-on-failure -j 1 --timeout 600
# Ceph daemons detach from the test that starts them; a test killed by its timeout leaves them.
pkill -f -- 'cairn-rgw-[^ ]*/ceph.conf' 2>/dev/null || true
run run_pytest
if [[ "${CAIRN_SKIP_SANITIZERS:-0}" != 1 ]]; then
  run scripts/build.sh asan
  run env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -L unit --output-on-failure -j 2 --timeout 600
  # The clang tree: the tests of the modules where threads meet, and cairn_fuse, the one
  # library with locks those tests do not pull in (thread-safety analysis); the CLI has none.
  # ufs_test: the stores' wrappers (retries, limits, the worker's absence cache) are shared by
  # every thread of a worker.
  run scripts/build.sh tsan cairn_fuse common_test net_test pagestore_test ufs_test \
    membership_test worker_test client_test transport_test tls_test http_test write_test
  run env TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
    ctest --test-dir build-tsan -L unit --output-on-failure -j 2 --timeout 600
  run scripts/fuzz.sh "${CAIRN_FUZZ_SECONDS:-15}"
fi
summarize
if ((status)); then echo "SOME TESTS FAILED"; else echo "ALL TESTS PASSED"; fi
exit $status
