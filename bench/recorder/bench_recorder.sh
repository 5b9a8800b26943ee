#!/usr/bin/env bash
# Recorder benchmarks, each side by side with perf in one run (root needed):
#   1. overhead: slowdown of a fixed CPU-bound job (one per CPU) with nothing,
#      with recorderd at its default rate, and with
#      `perf record --overwrite -a -g -F <same rate>`;
#   2. daemon cost: recorderd's own CPU time while the machine is idle / busy;
#   3. dump latency: `recorder dump --last 5s` request → committed record, vs
#      `perf record --overwrite --switch-output=signal` writing its file after
#      SIGUSR2.
# Usage: bench/recorder/bench_recorder.sh [ROUNDS] [ITERATIONS]
source "$(dirname "$0")/../common.sh"
ROUNDS=${1:-5}
ITERS=${2:-300000000}
RATE=99   # recorderd's default (-F)
bench_cleanup() { pkill -P $$ 2>/dev/null || true; }
bench_workdir /tmp/flightrec-bench.XXXXXX
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

run_job() {  # one bench_work per CPU at once; prints the slowest wall time
  local pids=() out
  for i in $(seq "$ncpu"); do "$B/bench/recorder/bench_work" "$ITERS" > "$work/w$i" & pids+=($!); done
  wait "${pids[@]}"
  cat "$work"/w* | awk '{print $1}' | sort -n | tail -1
}

start_recorderd() {
  "$B/recorder/daemon/recorderd" --store "$work/store" --socket "$work/sock" >"$work/d.log" 2>&1 &
  DPID=$!
  for _ in $(seq 100); do $R status >/dev/null 2>&1 && return; sleep 0.05; done
  echo "recorderd did not start" >&2; cat "$work/d.log" >&2; exit 1
}
# perf starts with its events disabled and is enabled through its control
# fifo once its start-up (reading /proc and kallsyms: seconds on a loaded
# machine) is over, so that neither the start-up is counted nor part of the
# job goes unsampled (a fixed `sleep 1` did both under load). -B: perf 6.1's
# build-id pass at exit aborts on this kernel (util/build-id.c:1010).
start_perf() {
  rm -f "$work/ctl" "$work/ack"; mkfifo "$work/ctl" "$work/ack"
  perf record --overwrite -a -g -F $RATE -o "$work/perf.data" -q -B -D -1 \
    --control "fifo:$work/ctl,$work/ack" -- sleep 3600 >/dev/null 2>&1 &
  PPID_=$!
  local ack
  # The opens block until perf has opened its ends; timeout bounds it all.
  ack=$(cd "$work" && timeout 120 bash -c 'exec 7>ctl 8<ack; echo enable >&7; read -r a <&8; echo "$a"') || true
  [ "$ack" = ack ] || { echo "perf did not acknowledge 'enable'" >&2; exit 1; }
}
stop_pid() { kill -INT "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

echo "== overhead: $ncpu x bench_work $ITERS, $ROUNDS rounds, alternating order"
: > "$work/base"; : > "$work/rec"; : > "$work/perf"
for r in $(seq "$ROUNDS"); do
  run_job >> "$work/base"
  start_recorderd; run_job >> "$work/rec"; stop_pid $DPID
  start_perf; run_job >> "$work/perf"; stop_pid $PPID_
done
base=$(median < "$work/base"); rec=$(median < "$work/rec"); prf=$(median < "$work/perf")
awk -v b="$base" -v r="$rec" -v p="$prf" -v rate=$RATE 'BEGIN {
  printf "  nothing:                         %.3f s\n", b;
  printf "  recorderd (-F %d, fp chains):    %.3f s  slowdown %+.2f%%\n", rate, r, (r/b-1)*100;
  printf "  perf record --overwrite -a -g:   %.3f s  slowdown %+.2f%%\n", p, (p/b-1)*100;
  printf "  recorderd slowdown / perf slowdown: %s\n", (p>b) ? sprintf("%.2f", (r-b)/(p-b)) : "n/a (perf within noise)" }'

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
echo "== daemon cost: recorderd CPU time over 10 s"
start_recorderd
t0=$(cpu_ticks $DPID); sleep 10; t1=$(cpu_ticks $DPID)
pids=(); for i in $(seq "$ncpu"); do "$B/bench/recorder/bench_work" 100000000000 >/dev/null & pids+=($!); done
t2=$(cpu_ticks $DPID); sleep 10; t3=$(cpu_ticks $DPID)
kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
hz=$(getconf CLK_TCK)
awk -v i=$((t1-t0)) -v b=$((t3-t2)) -v hz="$hz" 'BEGIN {
  printf "  idle machine: %.3f%% of one core\n", i/hz/10*100;
  printf "  busy machine: %.3f%% of one core (clock ticks: %d / %d s)\n", b/hz/10*100, b, 10 }'

echo "== dump latency: --last 5s, $ROUNDS dumps each, busy machine"
pids=(); for i in $(seq "$ncpu"); do "$B/bench/recorder/bench_work" 100000000000 >/dev/null & pids+=($!); done
sleep 6
: > "$work/lat"
for r in $(seq "$ROUNDS"); do
  $R dump --last 5s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["took_ms"])' >> "$work/lat"
  client=$( { /usr/bin/time -f %e $R dump --last 5s >/dev/null; } 2>&1 ); echo "$client" >> "$work/lat_client"
done
stop_pid $DPID
mkdir -p "$work/perfout"
perf record --overwrite -a -g -F $RATE --switch-output=signal -o "$work/perfout/perf.data" -q -- sleep 3600 >/dev/null 2>&1 &
PPID_=$!
sleep 6
: > "$work/plat"
for r in $(seq "$ROUNDS"); do
  n0=$(ls "$work/perfout" | wc -l)
  t0=$(date +%s.%N)
  kill -USR2 $PPID_
  # perf writes perf.data.<timestamp> and then starts a new one.
  while [ "$(ls "$work/perfout" | wc -l)" -le "$n0" ]; do sleep 0.002; done
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.1f\n", ($2-$1)*1000}' >> "$work/plat"
  sleep 5.5
done
stop_pid $PPID_
kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
ml=$(median < "$work/lat"); pl=$(median < "$work/plat"); cl=$(median < "$work/lat_client")
awk -v m="$ml" -v p="$pl" -v c="$cl" 'BEGIN {
  printf "  recorder dump --last 5s: %.1f ms in recorderd (median), %.0f ms including the CLI process\n", m, c*1000;
  printf "  perf --switch-output=signal: %.1f ms from SIGUSR2 to its file (median)\n", p;
  printf "  recorderd / perf dump time: %.2f\n", m/p }'
