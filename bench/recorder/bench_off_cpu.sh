#!/usr/bin/env bash
# Off-CPU capture cost, side by side in one run (root needed): the time of
# `perf bench sched messaging` (context-switch heavy: every message is a
# blocking read or write) with nothing recording, with `recorderd --off-cpu`
# (its defaults: 99 Hz samples, frame-pointer chains, the sched_switch rings
# and the drained switch log), and with `perf record -e sched:sched_switch -g
# -a` (every switch with its call chain, to a file), alternating, medians.
# Usage: bench/recorder/bench_off_cpu.sh [ROUNDS] [GROUPS] [LOOPS]
source "$(dirname "$0")/../common.sh"
ROUNDS=${1:-5}
GROUPS_=${2:-10}
LOOPS=${3:-500}
bench_cleanup() { pkill -P $$ 2>/dev/null || true; }
bench_workdir /tmp/flightrec-bench-offcpu.XXXXXX
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

run_job() {  # prints perf bench's "Total time" in seconds
  perf bench sched messaging -g "$GROUPS_" -l "$LOOPS" 2>/dev/null | awk '/Total time/ {print $3}'
}
start_recorderd() {
  "$B/recorder/daemon/recorderd" --store "$work/store" --socket "$work/sock" --off-cpu \
    >"$work/d.log" 2>&1 &
  DPID=$!
  for _ in $(seq 200); do $R status >/dev/null 2>&1 && return; sleep 0.05; done
  echo "recorderd did not start" >&2; cat "$work/d.log" >&2; exit 1
}
# As in bench_recorder.sh: enabled through its control fifo once its
# start-up is over; -B: perf 6.1's build-id pass at exit aborts on this kernel.
start_perf() {
  rm -f "$work/ctl" "$work/ack"; mkfifo "$work/ctl" "$work/ack"
  perf record -e sched:sched_switch -g -a -o "$work/perf.data" -q -B -D -1 \
    --control "fifo:$work/ctl,$work/ack" -- sleep 3600 >/dev/null 2>&1 &
  PPID_=$!
  local ack
  ack=$(cd "$work" && timeout 120 bash -c 'exec 7>ctl 8<ack; echo enable >&7; read -r a <&8; echo "$a"') || true
  [ "$ack" = ack ] || { echo "perf did not acknowledge 'enable'" >&2; exit 1; }
}
stop_pid() { kill -INT "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

echo "== perf bench sched messaging -g $GROUPS_ -l $LOOPS, $ROUNDS rounds, alternating"
: > "$work/base"; : > "$work/rec"; : > "$work/perf"
for r in $(seq "$ROUNDS"); do
  run_job >> "$work/base"
  start_recorderd; run_job >> "$work/rec"; stop_pid $DPID
  start_perf; run_job >> "$work/perf"; stop_pid $PPID_; rm -f "$work/perf.data"
done
base=$(median < "$work/base"); rec=$(median < "$work/rec"); prf=$(median < "$work/perf")
awk -v b="$base" -v r="$rec" -v p="$prf" 'BEGIN {
  printf "  nothing:                                %.3f s\n", b;
  printf "  recorderd --off-cpu:                    %.3f s  slowdown %+.1f%%\n", r, (r/b-1)*100;
  printf "  perf record -e sched:sched_switch -g -a: %.3f s  slowdown %+.1f%%\n", p, (p/b-1)*100;
  printf "  recorderd slowdown / perf slowdown: %s\n", (p>b) ? sprintf("%.2f", (r-b)/(p-b)) : "n/a (perf within noise)" }'
for f in base rec perf; do printf "  %s runs: %s\n" "$f" "$(tr '\n' ' ' < "$work/$f")"; done
