#!/usr/bin/env bash
# The real main job (called by scripts/demo.sh after setup): start recorderd
# on embedded defaults, run a workload with known functions, dump the last
# seconds and print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}
work=$(mktemp -d /tmp/flightrec-demo.XXXXXX)
export FLIGHTREC_STORE=${FLIGHTREC_STORE:-$work/store}
export FLIGHTREC_SOCKET=${FLIGHTREC_SOCKET:-$work/control.sock}
R="$BUILD_DIR/recorder/cli/recorder"

if [ "$(id -u)" != 0 ]; then
  echo "demo: recorderd samples every CPU and needs root (or CAP_PERFMON); run as root" >&2
  exit 1
fi

"$BUILD_DIR/recorder/daemon/recorderd" --foreground >"$work/recorderd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  "$R" status >/dev/null 2>&1 && break
  kill -0 $daemon 2>/dev/null || { cat "$work/recorderd.log"; exit 1; }
  sleep 0.1
done
echo "== recorder status"
"$R" status
echo
echo "== workload: fr_spin (spin_a ~70%, spin_b ~30% of its CPU) for 6 s"
"$BUILD_DIR/tests/programs/fr_spin" 6 >"$work/spin.out" &
spin=$!
pid=$spin
echo "   pid $pid; recording its last 5 s while it runs"
sleep 5.5
echo
echo "== recorder dump --last 5s --pid $pid"
"$R" dump --last 5s --pid "$pid"
wait $spin || true
echo
echo "== recorder report -1"
"$R" report -1 --limit 10
echo
echo "== recorder list"
"$R" list
echo
echo "store: $FLIGHTREC_STORE (kept); daemon log: $work/recorderd.log"
