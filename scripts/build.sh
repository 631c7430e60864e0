#!/usr/bin/env bash
# Configures and builds Cairn. Usage: scripts/build.sh [release|asan|tsan] [TARGET...]
# (default: release, every target).
# Build folders: build (release), build-asan, build-tsan.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
shift || true
targets=("$@")
jobs="${CAIRN_JOBS:-$(nproc)}"
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DCAIRN_SANITIZE=ON -DCAIRN_BUILD_BENCH=OFF) ;;
  tsan) dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=Debug -DCAIRN_TSAN=ON -DCAIRN_BUILD_BENCH=OFF) ;;
  *) echo "usage: $0 [release|asan|tsan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
if ((${#targets[@]})); then
  ninja -C "$dir" -j "$jobs" "${targets[@]}"
elif [[ "$kind" == release ]]; then
  ninja -C "$dir" -j "$jobs"
else
  # Sanitizer builds only need the unit tests.
  ninja -C "$dir" -j "$jobs" $(ninja -C "$dir" -t targets all | grep -oE '^[a-z_]+_test:' | tr -d ':' | sort -u)
fi
echo "built $dir"
