#!/usr/bin/env bash
# Upload throughput of the fleet S3 client vs `s3cmd put` to the same
# single-node radosgw (tests/fleet/ceph_cluster.sh), in the same run,
# alternating, each the same 1 GiB incompressible file (a large core).
# Prints each run and the ratio of medians (goal >= 0.9x).
# Then the index insert rate vs plain COPY (bench_index_pg, its own
# PostgreSQL 15): per-record AddRecord, batched AddRecords (what the shipper
# does with a backlog) and COPY, with fsync on, then off.
#   bench/fleet/bench_fleet.sh [--build-dir build] [--size-mib 1024] [--runs 3]
#                              [--only upload|index] [--records 5000]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build size_mib=1024 runs=3 only="" records=5000
while [ $# -gt 0 ]; do
  case "$1" in
  --build-dir) build=$2; shift 2 ;;
  --size-mib) size_mib=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --only) only=$2; shift 2 ;;
  --records) records=$2; shift 2 ;;
  *) echo "bench_fleet.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$only" != upload ]; then
  idx=$build/bench/fleet/bench_index_pg
  [ -x "$idx" ] || { echo "build $idx first" >&2; exit 1; }
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$idx" --records "$records" --clients 4 --batch 64
  "$idx" --records "$records" --clients 4 --batch 64 --crash-every 10
  "$idx" --records $((records * 4)) --clients 4 --batch 64 --no-fsync
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$only" = index ] && exit 0
fi
bin=$build/bench/fleet/bench_fleet_upload
[ -x "$bin" ] || { echo "build $bin first" >&2; exit 1; }
work=$(mktemp -d /tmp/flightrec-bench-fleet.XXXXXX)
cleanup() {
  tests/fleet/ceph_cluster.sh stop "$work/ceph" || true
  rm -rf "$work"
}
trap cleanup EXIT
# memstore holds objects in RAM: room for one copy plus slack (each copy is
# deleted before the next upload).
FLEET_CEPH_MEMORY_MB=$((size_mib * 2 + 1024)) tests/fleet/ceph_cluster.sh start "$work/ceph" $$
set -a
# shellcheck disable=SC1091
. "$work/ceph/env"
set +a
umask 077
cat >"$work/s3cfg" <<CFG
[default]
access_key = $FLEET_S3_ACCESS_KEY
secret_key = $FLEET_S3_SECRET_KEY
host_base = ${FLEET_S3_ENDPOINT#http://}
host_bucket = ${FLEET_S3_ENDPOINT#http://}
use_https = False
signature_v2 = False
CFG
head -c $((size_mib << 20)) /dev/urandom >"$work/core"
s3() { s3cmd -c "$work/s3cfg" --no-progress "$@"; }
# radosgw frees a deleted object's data only in its garbage collection (2 h
# later by default); memstore keeps it in RAM until then, so collect now.
del() {
  s3 del "$1" >/dev/null
  radosgw-admin -c "$FLEET_CEPH_CONF" gc process --include-all >/dev/null 2>&1
}
ours=() theirs=()
for i in $(seq "$runs"); do
  read -r _ secs mibs < <("$bin" "$work/core" "bench/ours-$i")
  ours+=("$mibs")
  echo "flightrec S3 client: ${size_mib} MiB in ${secs} s = ${mibs} MiB/s"
  del "s3://$FLEET_S3_BUCKET/bench/ours-$i"
  t0=$(date +%s.%N)
  s3 put "$work/core" "s3://$FLEET_S3_BUCKET/bench/s3cmd-$i" >/dev/null
  t1=$(date +%s.%N)
  mibs=$(echo "$size_mib / ($t1 - $t0)" | bc -l | xargs printf '%.1f')
  theirs+=("$mibs")
  echo "s3cmd put:           ${size_mib} MiB in $(echo "$t1 - $t0" | bc -l | xargs printf '%.3f') s = ${mibs} MiB/s"
  del "s3://$FLEET_S3_BUCKET/bench/s3cmd-$i"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mo=$(median "${ours[@]}")
mt=$(median "${theirs[@]}")
echo "median: flightrec ${mo} MiB/s, s3cmd ${mt} MiB/s, ratio $(echo "$mo / $mt" | bc -l | xargs printf '%.2f')x (goal >= 0.9x)"
