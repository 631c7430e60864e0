#!/bin/bash
# s3rver's throughput for ranged GETs of 1, 4 and 16 MiB (1 and 8 readers, kept-alive curl
# connections, SigV4) and for one whole-object GET, on one object of SIZE_MIB (default 256):
# how much a cache that fetches one page per request pays per request. Needs node_modules
# (npm ci) and curl. Usage: bash bench/s3_range_rate.sh [SIZE_MIB]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
SIZE_MIB=${1:-256}
WORK=$(mktemp -d /tmp/cairn-s3-range.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BUCKET=range-bench
mkdir "$WORK/data"
NODE_OPTIONS=--openssl-legacy-provider node "$REPO/node_modules/s3rver/bin/s3rver.js" \
  -d "$WORK/data" -a 127.0.0.1 -p "$PORT" --silent --no-vhost-buckets \
  --configure-bucket "$BUCKET" >"$WORK/s3rver.log" 2>&1 &
S3RVER=$!
trap 'kill $S3RVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/$BUCKET" && break; sleep 0.2; done
AUTH=(--silent --show-error --fail --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER
      -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
URL="http://127.0.0.1:$PORT/$BUCKET/obj"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$WORK/obj"
curl "${AUTH[@]}" -T "$WORK/obj" "$URL"
rm "$WORK/obj"
BYTES=$((SIZE_MIB << 20))
rate() {  # seconds -> MB/s
  python3 -c "print(f'{$BYTES / $1 / 1e6:.0f}')"
}
echo "s3rver at 127.0.0.1:$PORT, one object of $SIZE_MIB MiB"
for RANGE in 1 4 16; do
  SZ=$((RANGE << 20))
  : >"$WORK/cfg"
  for i in $(seq 0 $((SIZE_MIB / RANGE - 1))); do
    [ "$i" -gt 0 ] && echo next >>"$WORK/cfg"
    cat >>"$WORK/cfg" <<CFG
url = "$URL"
range = $((i * SZ))-$((i * SZ + SZ - 1))
output = "/dev/null"
aws-sigv4 = "aws:amz:us-east-1:s3"
user = "S3RVER:S3RVER"
header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"
fail
CFG
  done
  for READERS in 1 8; do
    PAR=()
    [ "$READERS" -gt 1 ] && PAR=(--parallel --parallel-max "$READERS")
    T0=$(date +%s.%N)
    curl --silent --show-error --no-progress-meter "${PAR[@]}" --config "$WORK/cfg"
    T1=$(date +%s.%N)
    echo "range ${RANGE} MiB, ${READERS} reader(s): $(rate "$(python3 -c "print($T1 - $T0)")") MB/s"
  done
done
T0=$(date +%s.%N)
curl "${AUTH[@]}" -o /dev/null "$URL"
T1=$(date +%s.%N)
echo "whole object, 1 GET: $(rate "$(python3 -c "print($T1 - $T0)")") MB/s"
