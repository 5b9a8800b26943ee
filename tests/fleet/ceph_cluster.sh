#!/usr/bin/env bash
# A throwaway single-node Ceph cluster with its S3 gateway, on loopback, for
# the fleet tests and benchmarks (the recipe checked in /work/shared/DESIGN.md:
# no auth, memstore, pool size 1).
#
#   ceph_cluster.sh start DIR [OWNER_PID]   start it under DIR; writes DIR/env
#   ceph_cluster.sh stop DIR                stop every daemon it started, by pid
#   ceph_cluster.sh kill-rgw DIR            SIGKILL radosgw only (fault tests)
#   ceph_cluster.sh start-rgw DIR           start radosgw again, wait until it serves
#   ceph_cluster.sh pause-rgw DIR           SIGSTOP radosgw: a partitioned gateway (connections
#                                           are still accepted by the kernel, nothing answers)
#   ceph_cluster.sh resume-rgw DIR          SIGCONT it, wait until it serves
#
# Bounded in memory: every daemon runs in a memory cgroup of its own limited to
# FLEET_CEPH_MEMORY_MB (default 2048; memstore keeps objects in RAM, so the
# limit also bounds what the tests may upload). Bounded in time: each startup
# step waits for its condition for at most FLEET_CEPH_STEP_TIMEOUT seconds
# (default 120: an OSD has been seen to take over 60 s to boot on a shared,
# loaded machine). If OWNER_PID is given, a watchdog stops the cluster when
# that process exits, however it exits (a crashed test binary leaves nothing).
# DIR/env holds shell assignments: FLEET_S3_ENDPOINT, FLEET_S3_ACCESS_KEY,
# FLEET_S3_SECRET_KEY, FLEET_S3_BUCKET, FLEET_S3_REGION, FLEET_CEPH_STARTUP_MS.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || {
  echo "usage: $0 start|stop|kill-rgw|start-rgw|pause-rgw|resume-rgw DIR [OWNER_PID]" >&2
  exit 2
}
dir=$(realpath -m "$dir")
step_timeout=${FLEET_CEPH_STEP_TIMEOUT:-120}
mem_mb=${FLEET_CEPH_MEMORY_MB:-2048}
conf=$dir/ceph.conf

log() { echo "ceph_cluster: $*" >&2; }

# Runs "$@" until it succeeds or $step_timeout seconds pass (a bounded wait on
# a condition; the 0.2 s pause only paces the polling).
wait_for() {
  local what=$1
  shift
  local deadline=$((SECONDS + step_timeout))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      log "timed out after ${step_timeout}s waiting for $what (logs in $dir/log)"
      return 1
    fi
    sleep 0.2
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The memory cgroup the daemons run in (cgroup v1 memory controller, or v2).
cgroup_path() {
  local rel
  if rel=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup) && [ -n "$rel" ]; then
    echo "/sys/fs/cgroup/memory${rel%/}/flightrec-ceph-$(basename "$dir")-$$"
  else
    rel=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    echo "/sys/fs/cgroup${rel%/}/flightrec-ceph-$(basename "$dir")-$$"
  fi
}

make_cgroup() {
  local cg
  cg=$(cgroup_path)
  mkdir "$cg" || {
    log "cannot create memory cgroup $cg"
    return 1
  }
  if [ -e "$cg/memory.limit_in_bytes" ]; then
    echo $((mem_mb * 1024 * 1024)) >"$cg/memory.limit_in_bytes"
  else
    echo $((mem_mb * 1024 * 1024)) >"$cg/memory.max"
  fi
  echo "$cg" >"$dir/cgroup"
}

# Starts one daemon in the foreground of a background job, inside the cgroup;
# its pid goes to DIR/pids (one "name pid" a line), which is what stop kills.
spawn() {
  local name=$1
  shift
  (
    echo $BASHPID >"$(cat "$dir/cgroup")/cgroup.procs"
    exec setsid "$@" </dev/null >>"$dir/log/$name.out" 2>&1
  ) &
  echo "$name $!" >>"$dir/pids"
}

kill_named() {
  local want=$1 sig=$2 name pid
  [ -f "$dir/pids" ] || return 0
  while read -r name pid; do
    if [ "$name" = "$want" ] || [ "$want" = all ]; then
      kill "-$sig" "$pid" 2>/dev/null || true
    fi
  done <"$dir/pids"
}

# SIGSTOP/SIGCONT to the radosgw processes we started that are still radosgw:
# the pids file keeps the pids of gateways killed earlier, which the system
# may have given to another process since.
signal_rgw() {
  local sig=$1 name pid
  [ -f "$dir/pids" ] || return 0
  while read -r name pid; do
    if [ "$name" = rgw ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = radosgw ]; then
      kill "-$sig" "$pid" 2>/dev/null || true
    fi
  done <"$dir/pids"
}

rgw_serves() { curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$rgw_port/"; }

start_rgw() {
  # --ms-mon-client-mode crc: radosgw 16.2 otherwise insists on a secure
  # connection to the mon even with auth none (DESIGN.md).
  spawn rgw radosgw -f -c "$conf" -n client.rgw.a --ms-mon-client-mode crc
  wait_for "radosgw on port $rgw_port" rgw_serves
}

stop_all() {
  [ -d "$dir" ] || return 0
  signal_rgw CONT # a paused gateway would not act on TERM
  kill_named all TERM
  local cg=""
  [ -f "$dir/cgroup" ] && cg=$(cat "$dir/cgroup")
  # Whatever is left in our cgroup (children the daemons forked) is ours too.
  local deadline=$((SECONDS + 15)) left
  while [ -n "$cg" ] && [ -d "$cg" ]; do
    left=$(cat "$cg/cgroup.procs" 2>/dev/null || true)
    [ -z "$left" ] && break
    if [ $SECONDS -ge $deadline ]; then
      for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
    fi
    sleep 0.1
  done
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
  rm -f "$dir/pids" "$dir/cgroup"
  if [ -f "$dir/watchdog.pid" ]; then
    local w
    w=$(cat "$dir/watchdog.pid")
    rm -f "$dir/watchdog.pid"
    [ "$w" != "${WATCHDOG_SELF:-}" ] && kill "$w" 2>/dev/null || true
  fi
}

load_ports() { # shellcheck disable=SC1091
  . "$dir/ports"
}

case "$cmd" in
stop)
  stop_all
  exit 0
  ;;
kill-rgw)
  kill_named rgw KILL
  exit 0
  ;;
start-rgw)
  load_ports
  start_rgw
  exit 0
  ;;
pause-rgw)
  signal_rgw STOP
  exit 0
  ;;
resume-rgw)
  load_ports
  signal_rgw CONT
  wait_for "radosgw on port $rgw_port" rgw_serves
  exit 0
  ;;
start) ;;
*)
  echo "$0: unknown command '$cmd'" >&2
  exit 2
  ;;
esac

owner=${3:-}
t0=$(date +%s%N)
mkdir -p "$dir"/{mon,osd,run,log,rgw}
: >"$dir/pids"
trap 'rc=$?; [ $rc -ne 0 ] && { log "start failed; stopping what was started"; stop_all; }; exit $rc' EXIT
make_cgroup

mon_port=$(free_port)
rgw_port=$(free_port)
echo "mon_port=$mon_port rgw_port=$rgw_port" >"$dir/ports"
fsid=$(cat /proc/sys/kernel/random/uuid)
cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
ms bind msgr2 = false
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
osd crush chooseleaf type = 0
# The harness places the OSD in the CRUSH map itself (osd crush add below):
# the boot-time "osd crush create-or-move" and "set-device-class" commands
# are what the mon answered with 'wrong fsid' under load (see the start loop).
osd crush update on start = false
osd class update on start = false
osd objectstore = memstore
memstore device bytes = $(((mem_mb - 512) * 1024 * 1024))
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
mgr data = $dir/mgr/\$cluster-\$id
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = $dir/keyring
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
EOF

if [ -n "$owner" ]; then
  # Stops the cluster once the owner is gone: exited, or a zombie nobody
  # reaps (in a container whose pid 1 does not reap, `tail --pid` would wait
  # on a zombie forever, so the state is read from /proc). Polled once a
  # second: a watchdog, not a synchronisation.
  setsid bash -c "
    while [ -e /proc/$owner ] && [ \"\$(sed 's/.*) //' /proc/$owner/stat 2>/dev/null | cut -c1)\" != Z ]; do
      sleep 1
    done
    WATCHDOG_SELF=\$\$ '$0' stop '$dir'" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/watchdog.pid"
fi

ceph_q() { timeout 10 ceph -c "$conf" --connect-timeout 5 "$@"; }

monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >/dev/null 2>&1
spawn mon ceph-mon -f -c "$conf" -i a
wait_for "ceph-mon" ceph_q mon stat

mkdir -p "$dir/mgr/ceph-x"
spawn mgr ceph-mgr -f -c "$conf" -i x

# A fresh mon may refuse commands for a moment after answering `mon stat`
# (EPERM "problem getting command descriptions"); both commands are idempotent
# (osd create with a uuid returns the same id), so they are retried.
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
wait_for "osd create" ceph_q osd create "$osd_uuid"
osd_id=$(ceph_q osd create "$osd_uuid")
mkdir -p "$dir/osd/ceph-$osd_id"
ceph-osd -c "$conf" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >"$dir/log/osd-mkfs.out" 2>&1
wait_for "osd crush add" ceph_q osd crush add "osd.$osd_id" 1.0 host=localhost root=default
osd_up() { ceph_q osd stat -f json | grep -q '"num_up_osds":1'; }
# Under load the OSD has been seen to send its boot-time "osd crush
# create-or-move" before its MonClient knew the cluster's fsid: the mon
# answers 'wrong fsid' (osd log: mon_cmd_maybe_osd_create fail) and the OSD
# never comes up, three attempts in a row once (2026-11-26, load ~15). The
# conf now turns those boot-time commands off (osd crush update on start);
# the restart loop stays as a second line: at most 3 attempts of 60 s each,
# the dead attempt killed and gone before the next starts.
osd_started=0
for attempt in 1 2 3; do
  spawn osd ceph-osd -f -c "$conf" -i "$osd_id"
  if step_timeout=60 wait_for "ceph-osd up (attempt $attempt)" osd_up; then
    osd_started=1
    break
  fi
  kill_named osd KILL
  osd_gone() { ! pgrep -f "ceph-osd -f -c $conf" >/dev/null; }
  wait_for "the failed ceph-osd to exit" osd_gone
done
[ "$osd_started" = 1 ] || exit 1

start_rgw

access=FLEETTESTACCESS$RANDOM
secret=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
radosgw-admin -c "$conf" user create --uid=fleet --display-name=fleet \
  --access-key="$access" --secret="$secret" >/dev/null 2>"$dir/log/user-create.err"
bucket=flightrec-test
# curl's SigV4 signing, with the payload hash radosgw accepts for an empty body.
curl -sf --max-time 30 -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
  -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "http://127.0.0.1:$rgw_port/$bucket" >/dev/null
t1=$(date +%s%N)

umask 077
cat >"$dir/env" <<EOF
FLEET_S3_ENDPOINT=http://127.0.0.1:$rgw_port
FLEET_S3_ACCESS_KEY=$access
FLEET_S3_SECRET_KEY=$secret
FLEET_S3_BUCKET=$bucket
FLEET_S3_REGION=us-east-1
FLEET_CEPH_CONF=$conf
FLEET_CEPH_STARTUP_MS=$(((t1 - t0) / 1000000))
EOF
log "up in $(((t1 - t0) / 1000000)) ms: S3 at http://127.0.0.1:$rgw_port, bucket $bucket"
