#!/usr/bin/env bash
# A throwaway single-node Ceph object gateway (radosgw) for tests that need strict S3 behaviour:
# real SigV4 verification, conditional requests, multipart uploads with S3's ETags, abort.
#
#   radosgw.sh start DIR PORT ACCESS_KEY SECRET_KEY   # prints "ready" once S3 answers on PORT
#   radosgw.sh stop DIR                               # stops every daemon by its pid file
#
# One ceph-mon, one ceph-mgr, one ceph-osd on memstore (objects live in the OSD's RAM), cephx
# off, pools of size 1, radosgw with the beast frontend on 127.0.0.1:PORT. Everything (config,
# data, logs, sockets, pid files) stays under DIR. About 15 s to start. Needs Debian's
# ceph-mon ceph-osd ceph-mgr radosgw ceph-common (scripts/install-deps.sh).
#
# Environment (benchmarks): RADOSGW_MEMSTORE_BYTES, the OSD's RAM for objects (default 2 GiB);
# RADOSGW_EXTRA_CONF, lines appended to the gateway's config section (for example a short
# garbage-collection wait, so that deleted objects give their memory back).
set -euo pipefail

cmd=${1:?usage: radosgw.sh start DIR PORT ACCESS SECRET | stop DIR}
dir=${2:?missing DIR}

stop() {
  for f in "$dir"/run/*.pid; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    alive=0
    for f in "$dir"/run/*.pid; do
      [[ -f "$f" ]] || continue
      pid=$(cat "$f" 2>/dev/null || true)
      [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && alive=1
    done
    ((alive)) || return 0
    sleep 0.1
  done
  for f in "$dir"/run/*.pid; do
    pid=$(cat "$f" 2>/dev/null || true)
    [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
  done
}

if [[ "$cmd" == stop ]]; then
  stop
  exit 0
fi
[[ "$cmd" == start ]] || { echo "unknown command $cmd" >&2; exit 2; }
port=${3:?missing PORT}
access=${4:?missing ACCESS_KEY}
secret=${5:?missing SECRET_KEY}
for bin in ceph-mon ceph-osd ceph-mgr radosgw radosgw-admin monmaptool ceph; do
  command -v "$bin" >/dev/null || { echo "$bin is missing: run scripts/install-deps.sh" >&2; exit 3; }
done

mkdir -p "$dir"/{mon,osd,mgr,run,log,rgw}
mon_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fsid=$(cat /proc/sys/kernel/random/uuid)
conf="$dir/ceph.conf"
cat > "$conf" <<CONF
[global]
fsid = $fsid
mon host = 127.0.0.1:$mon_port
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
ms mon client mode = crc
ms client mode = crc
ms service mode = crc
ms cluster mode = crc
ms mon service mode = crc
ms mon cluster mode = crc
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = ${RADOSGW_MEMSTORE_BYTES:-2147483648}
osd max object name len = 460
osd max object namespace len = 64
ms bind ipv6 = false
run dir = $dir/run
log file = $dir/log/\$name.log
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
[mon.a]
mon data = $dir/mon
[mgr.x]
mgr data = $dir/mgr
[osd.0]
osd data = $dir/osd
[client.rgw.test]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
rgw enable usage log = false
${RADOSGW_EXTRA_CONF:-}
CONF

trap 'stop' ERR
monmaptool --create --clobber --fsid "$fsid" --add a "127.0.0.1:$mon_port" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >/dev/null 2>&1
ceph-mon -c "$conf" -i a
ceph-mgr -c "$conf" -i x
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
ceph -c "$conf" osd new "$osd_uuid" >/dev/null 2>&1
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1
ceph-osd -c "$conf" -i 0 >/dev/null 2>&1
for _ in $(seq 300); do
  ceph -c "$conf" osd stat 2>/dev/null | grep -q "1 up" && break
  sleep 0.1
done
ceph -c "$conf" osd stat 2>/dev/null | grep -q "1 up" || { echo "osd did not come up" >&2; stop; exit 1; }
radosgw -c "$conf" -n client.rgw.test
for _ in $(seq 600); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$port/" || { echo "radosgw did not answer" >&2; stop; exit 1; }
radosgw-admin -c "$conf" user create --uid=cairn --display-name=cairn \
  --access-key="$access" --secret="$secret" >/dev/null 2>&1
echo ready
