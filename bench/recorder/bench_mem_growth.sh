#!/usr/bin/env bash
# The cost of recorderd's memory-growth sampling (--mem-growth: page-faults,
# one sample in 64 with its user call chain, and every process's RSS every
# 250 ms) on allocation-heavy programs, side by side in one run with no
# recording and with recorderd --mem-growth off. Root needed.
#
# Workloads (bench_alloc): `faults` maps, touches and unmaps 64 MiB a round
# (every instruction is the page-fault path: the worst case), `malloc` does
# random malloc/free/write of 16 B..64 KiB (an allocating server). For each
# repetition the three conditions run in turn (none, off, on), each with a
# fresh recorderd (perf backend, defaults otherwise, started before and
# stopped after the timed run), so that drift in the machine's load falls on
# all three alike; the medians are compared. The figure is the program's own
# CPU time (user + system, getrusage): the sampling's cost is spent in the
# fault path, in the program's context, and on a loaded machine (these
# development VMs run at a load of 15 on 2 CPUs) wall time is mostly the
# wait for a CPU. Wall time is in the TSV too.
#
# Usage: bench/recorder/bench_mem_growth.sh [REPS] [FAULT_ROUNDS] [MALLOC_ROUNDS] [DIR]
#   defaults: 9 repetitions, 10 rounds (2.6 GiB of faults), 3 rounds, bench-out.
# Writes DIR/mem_growth.tsv (every run) and prints the medians.
source "$(dirname "$0")/../common.sh"
REPS=${1:-9}
FAULT_ROUNDS=${2:-10}
MALLOC_ROUNDS=${3:-3}
OUT=${4:-bench-out}
DPID=""
bench_cleanup() {
  [ -n "$DPID" ] && kill "$DPID" 2>/dev/null || true
  wait 2>/dev/null || true
}
bench_workdir /tmp/flightrec-bench-memgrowth.XXXXXX
for f in "$B/bench/recorder/bench_alloc" "$B/recorder/cli/recorder" "$B/recorder/daemon/recorderd"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $B recorder recorderd bench_alloc)" >&2; exit 1; }
done
mkdir -p "$OUT"
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

start_recorderd() {  # $1 = on|off
  rm -rf "$work/store"
  "$B/recorder/daemon/recorderd" --backend perf --mem-growth "$1" \
    --store "$work/store" --socket "$work/sock" >"$work/d.log" 2>&1 &
  DPID=$!
  for _ in $(seq 600); do $R status >/dev/null 2>&1 && return; sleep 0.05; done
  echo "recorderd did not start" >&2; cat "$work/d.log" >&2; exit 1
}
stop_recorderd() { kill -INT "$DPID" 2>/dev/null || true; wait "$DPID" 2>/dev/null || true; DPID=""; }

echo -e "workload\tcondition\trep\twall_s\tfaults\tcpu_s" > "$OUT/mem_growth.tsv"
for rep in $(seq "$REPS"); do
  for w in faults malloc; do
    rounds=$FAULT_ROUNDS
    [ "$w" = malloc ] && rounds=$MALLOC_ROUNDS
    for cond in none off on; do
      [ "$cond" != none ] && start_recorderd "$cond"
      read -r secs faults cpu < <("$B/bench/recorder/bench_alloc" "$w" "$rounds")
      [ "$cond" != none ] && stop_recorderd
      echo -e "$w\t$cond\t$rep\t$secs\t$faults\t$cpu" >> "$OUT/mem_growth.tsv"
      echo "$w $cond rep $rep: CPU ${cpu}s, wall ${secs}s"
    done
  done
done

echo
echo "medians of $REPS runs, the program's CPU seconds (slowdown of --mem-growth on against no"
echo "recording and against --mem-growth off):"
for w in faults malloc; do
  m() { awk -v w="$w" -v c="$1" -F'\t' '$1 == w && $2 == c {print $6}' "$OUT/mem_growth.tsv" | median; }
  none=$(m none) off=$(m off) on=$(m on)
  awk -v w="$w" -v n="$none" -v f="$off" -v o="$on" 'BEGIN {
    printf "%-7s none %.3f s  off %.3f s  on %.3f s  on vs none %+.2f%%  on vs off %+.2f%%\n",
           w, n, f, o, (o / n - 1) * 100, (o / f - 1) * 100 }'
done
