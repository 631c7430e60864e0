#!/usr/bin/env bash
# Checks that every C++ file git tracks follows .clang-format (clang-format 14). Prints the files
# that do not and a diff of the first; exits 1 if any. Fix with: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  if ! clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "not formatted (run scripts/check-format.sh --fix): ${bad[*]}" >&2
  clang-format --style=file "${bad[0]}" | diff -u "${bad[0]}" - | head -40 >&2 || true
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
