#!/usr/bin/env bash
# README command 1: sets everything up on a fresh Debian 12 machine and runs the main job on the
# embedded default: a generated local folder as the data lake, one node, no etcd, no S3.
# It serves the folder through a Cairn FUSE mount, reads it twice and prints cold vs warm
# throughput, the hit ratio and a byte-for-byte check against the source.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --build-only
scripts/build.sh release cairn cairn_python
scripts/install-python.sh >/dev/null
exec ./build/cairn demo "$@"
