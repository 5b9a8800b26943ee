#!/usr/bin/env bash
# DWARF unwinding benchmarks (issue 7), each side by side with perf in one run
# (root needed):
#   1. unwinding throughput: `recorder report --children` over a
#      --call-graph dwarf record of >= 200 000 samples, vs
#      `perf report --stdio --sort sym` over a `perf record --call-graph dwarf`
#      perf.data of the same workload, rate and stack size (same sample count
#      ±5%); samples per second of each, their ratio, peak RSS of each
#      (/usr/bin/time -v "Maximum resident set size");
#   2. capture overhead at the default rate: slowdown of a fixed CPU-bound job
#      (one per CPU) under `recorder record --call-graph fp`, `--call-graph
#      dwarf` (8192-byte copies) and `perf record --call-graph dwarf`.
# The workload of 1 is tests/unwind/fr_deep (-O2 -fomit-frame-pointer, hot
# function 20 frames deep through the executable and a shared library), one
# per CPU.
# Usage: bench/unwind/bench_unwind.sh [SECONDS] [HZ] [STACK_BYTES] [ROUNDS] [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${FLIGHTREC_BUILD_DIR:-build}
SECS=${1:-12}
HZ=${2:-10000}
STACK=${3:-2048}
ROUNDS=${4:-3}
ITERS=${5:-1000000000}
work=$(mktemp -d /tmp/flightrec-bench-unwind.XXXXXX)
trap 'rm -rf "$work"' EXIT
ncpu=$(nproc)
R="$B/recorder/cli/recorder --store $work/store"
for f in "$B/tests/unwind/fr_deep" "$B/bench/recorder/bench_work" "$B/recorder/cli/recorder"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $B recorder fr_deep bench_work)" >&2; exit 1; }
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# Runs a command, prints "seconds peak_rss_kb" (from /usr/bin/time -v).
measure() {
  /usr/bin/time -v -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]}
              /Maximum resident set size/ {m=$2} END {print s, m}' "$work/t"
}

workload="for i in \$(seq $ncpu); do $B/tests/unwind/fr_deep $SECS >/dev/null & done; wait"
echo "== 1. unwinding throughput: $ncpu x fr_deep ${SECS}s at $HZ Hz, --call-graph dwarf,$STACK"
# Rings for the whole run: 512 MiB per CPU.
$R record -F "$HZ" --call-graph "dwarf,$STACK" --ring-pages 131072 --history "$((SECS + 10))s" \
  --last "$((SECS + 10))s" --always -- sh -c "$workload" 2>"$work/rec.log" || {
  cat "$work/rec.log"; exit 1; }
ours=$($R info -1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["samples"])')
perf record -q -F "$HZ" --call-graph "dwarf,$STACK" -o "$work/perf.data" -- sh -c "$workload" \
  2>"$work/perf.log"
theirs=$(perf script -i "$work/perf.data" -F tid 2>/dev/null | wc -l)
echo "samples: recorder record ${ours}, perf record ${theirs}"
echo "record sizes: recorder $(du -h "$work/store"/*.frec | awk '{print $1}' | tail -1), perf.data $(du -h "$work/perf.data" | awk '{print $1}')"
if [ "$ours" -lt 200000 ] || [ "$theirs" -lt 200000 ]; then
  echo "warning: fewer than 200 000 samples; raise SECONDS or HZ" >&2
fi
: > "$work/ours"; : > "$work/theirs"
for r in $(seq "$ROUNDS"); do
  # Alternate the order so neither tool always runs with a warm page cache.
  if [ $((r % 2)) -eq 1 ]; then
    measure $R report -1 --children >> "$work/ours"
    measure perf report -i "$work/perf.data" --stdio --sort sym >> "$work/theirs"
  else
    measure perf report -i "$work/perf.data" --stdio --sort sym >> "$work/theirs"
    measure $R report -1 --children >> "$work/ours"
  fi
done
# Both see the whole chain: the 20 functions each hold ~all samples.
$R report -1 --children | grep -c 'fr_deep_[el][0-9]' | sed 's/^/recorder report rows of the chain: /'
perf report -i "$work/perf.data" --stdio --sort sym -g none 2>/dev/null | grep -c 'fr_deep_[el][0-9]' \
  | sed 's/^/perf report rows of the chain:     /'
ot=$(awk '{print $1}' "$work/ours" | median); om=$(awk '{print $2}' "$work/ours" | sort -n | tail -1)
tt=$(awk '{print $1}' "$work/theirs" | median); tm=$(awk '{print $2}' "$work/theirs" | sort -n | tail -1)
python3 - "$ours" "$ot" "$om" "$theirs" "$tt" "$tm" <<'PY'
import sys
n1, t1, m1, n2, t2, m2 = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
r1, r2 = n1 / max(t1, 1e-3), n2 / max(t2, 1e-3)
print(f"recorder report --children: {n1} samples in {t1:.2f} s = {r1/1e3:.0f} k samples/s, peak RSS {m1/1024:.0f} MiB")
print(f"perf report --stdio:        {n2} samples in {t2:.2f} s = {r2/1e3:.0f} k samples/s, peak RSS {m2/1024:.0f} MiB")
print(f"ratio (samples/s, recorder / perf): {r1/r2:.1f}x   (goal >= 5x)")
PY

RATE=99  # the default -F of recorderd and recorder record
echo "== 2. capture overhead at $RATE Hz: $ncpu x bench_work $ITERS, $ROUNDS rounds, alternating order"
job() {  # one bench_work per CPU; prints the slowest wall time
  rm -f "$work"/w*
  "$@" sh -c "for i in \$(seq $ncpu); do $B/bench/recorder/bench_work $ITERS > $work/w\$i & done; wait" \
    >/dev/null 2>&1
  cat "$work"/w* | awk '{print $1}' | sort -n | tail -1
}
: > "$work/none"; : > "$work/fp"; : > "$work/dwarf"; : > "$work/pdwarf"
for r in $(seq "$ROUNDS"); do
  job env >> "$work/none"
  job $R record -F $RATE --call-graph fp -- >> "$work/fp"
  job $R record -F $RATE --call-graph dwarf -- >> "$work/dwarf"
  job perf record -q -F $RATE --call-graph dwarf -o "$work/p.data" -- >> "$work/pdwarf"
done
b=$(median < "$work/none"); f=$(median < "$work/fp"); d=$(median < "$work/dwarf"); p=$(median < "$work/pdwarf")
awk -v b="$b" -v f="$f" -v d="$d" -v p="$p" -v rate=$RATE 'BEGIN {
  printf "  nothing:                                      %.3f s\n", b;
  printf "  recorder record --call-graph fp:              %.3f s  slowdown %+.2f%%\n", f, (f/b-1)*100;
  printf "  recorder record --call-graph dwarf (8192 B):  %.3f s  slowdown %+.2f%%\n", d, (d/b-1)*100;
  printf "  perf record --call-graph dwarf (8192 B):      %.3f s  slowdown %+.2f%%\n", p, (p/b-1)*100 }'
