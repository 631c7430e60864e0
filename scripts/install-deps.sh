#!/usr/bin/env bash
# Installs every Debian and npm package Cairn's build, tests and benchmarks need. Idempotent:
# packages already present are skipped quickly. Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PKGS=(cmake ninja-build g++ pkg-config git
  libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev libxxhash-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libpugixml-dev libgtest-dev libgmock-dev
  libbenchmark-dev libboost-dev clang clang-format pybind11-dev python3-dev)
TEST_PKGS=(python3 python3-pytest python3-boto3 python3-fsspec python3-torch python3-numpy
  python3-pandas
  fio procps psmisc curl rsync etcd-server etcd-client prometheus
  ceph-mon ceph-osd ceph-mgr radosgw ceph-common)
BENCH_PKGS=(s3fs rclone)

want=("${BUILD_PKGS[@]}")
if [[ "${1:-}" != "--build-only" ]]; then want+=("${TEST_PKGS[@]}" "${BENCH_PKGS[@]}"); fi
# Node.js and npm for the S3 test server, unless a node/npm pair is already installed.
if ! command -v npm >/dev/null 2>&1; then want+=(nodejs npm); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ "${1:-}" != "--build-only" ]]; then
  # s3rver (pinned in package-lock.json) for the S3 integration tests.
  if [[ ! -x node_modules/.bin/s3rver ]]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
fi
echo "dependencies ready"
