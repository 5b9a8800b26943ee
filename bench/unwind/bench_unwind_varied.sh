#!/usr/bin/env bash
# DWARF unwinding on identical and on varied stacks, side by side with perf in
# one run (root needed). Two workloads, each recorded once by `recorder record
# --call-graph dwarf,STACK` and once by `perf record --call-graph
# dwarf,STACK` at HZ, then ROUNDS alternated rounds of `recorder report -1
# --children` vs `perf report --children --stdio --sort sym` (CPU seconds =
# user + system, wall seconds, peak RSS, from /usr/bin/time -v; medians):
#   identical: tests/unwind/fr_deep, a 20-deep chain whose stack bytes repeat
#              (the hot loop keeps everything in registers);
#   varied:    bench/unwind/fr_vary, a 20-deep chain whose links spill their
#              arguments and whose leaf keeps writing a stack array, so every
#              sample's bytes differ; 16 distinct call paths.
# Both: -O2 -fomit-frame-pointer, frames in the executable and a shared
# library, a fixed number of calls per CPU sized from a measured call so
# each side gets ~SAMPLES samples however busy the machine is.
# Usage: bench/unwind/bench_unwind_varied.sh [SAMPLES] [HZ] [STACK_BYTES] [ROUNDS]
source "$(dirname "$0")/../common.sh"
TARGET=${1:-50000}
HZ=${2:-4999}
STACK=${3:-4096}
ROUNDS=${4:-3}
bench_workdir /var/tmp/flightrec-bench-unwind-varied.XXXXXX
R="$B/recorder/cli/recorder"
for f in "$B/tests/unwind/fr_deep" "$B/bench/unwind/fr_vary" "$R"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $B recorder fr_deep fr_vary)" >&2; exit 1; }
done
echo "# $(date -u +%FT%TZ), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')), $(uname -r)," \
  "$(perf version), load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Runs a command, appends "wall_seconds peak_rss_kb cpu_seconds" to $1.
measure() {
  local out=$1
  shift
  /usr/bin/time -v -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]}
              /User time/ {c+=$2} /System time/ {c+=$2}
              /Maximum resident set size/ {m=$2} END {print s, m, c}' "$work/t" >> "$out"
}

# record NAME PROGRAM: records NAME's workload with both tools into
# $work/NAME.store and $work/NAME.perf.data; sets calls_NAME, ours_NAME, theirs_NAME.
record() {
  local name=$1 prog=$2
  /usr/bin/time -f '%U %S' -o "$work/cal" "$prog" -n 40
  local per_call calls pages=1
  per_call=$(awk '{print ($1 + $2) / 40}' "$work/cal")
  calls=$(awk -v t="$TARGET" -v hz="$HZ" -v n="$ncpu" -v c="$per_call" \
    'BEGIN {printf "%d", t * 1.04 / (hz * n * c) + 1}')
  local workload="for i in \$(seq $ncpu); do $prog -n $calls & done; wait"
  while [ $((pages * 4096 * ncpu)) -lt $((TARGET * 2 * (STACK + 400))) ]; do pages=$((pages * 2)); done
  $R --store "$work/$name.store" record -F "$HZ" --call-graph "dwarf,$STACK" --ring-pages "$pages" \
    --history 1h --last 1h --always -- sh -c "$workload" 2>"$work/rec.log" ||
    { cat "$work/rec.log"; exit 1; }
  perf record -q -F "$HZ" --call-graph "dwarf,$STACK" -m 16M -o "$work/$name.perf.data" \
    -- sh -c "$workload" 2>"$work/perf.log"
  local ours theirs
  ours=$($R --store "$work/$name.store" info -1 --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["samples"])')
  theirs=$(perf script -i "$work/$name.perf.data" -F tid 2>/dev/null | wc -l)
  echo "$name: $ncpu x $(basename "$prog") -n $calls (${per_call} CPU s a call): samples recorder" \
    "$ours, perf $theirs; record $(du -h "$work/$name.store"/*.frec | awk '{print $1}' | tail -1)," \
    "perf.data $(du -h "$work/$name.perf.data" | awk '{print $1}')"
  eval "ours_$name=$ours theirs_$name=$theirs"
}

echo "== recording at $HZ Hz, --call-graph dwarf,$STACK, ~$TARGET samples a side"
record identical "$B/tests/unwind/fr_deep"
record varied "$B/bench/unwind/fr_vary"

echo "== $ROUNDS rounds, alternated: recorder report -1 --children vs perf report --children --stdio"
for name in identical varied; do : > "$work/$name.ours"; : > "$work/$name.theirs"; done
for r in $(seq "$ROUNDS"); do
  for name in identical varied; do
    ours_cmd=($R --store "$work/$name.store" report -1 --children)
    theirs_cmd=(perf report -i "$work/$name.perf.data" --children --stdio --sort sym)
    if [ $((r % 2)) -eq 1 ]; then
      measure "$work/$name.ours" "${ours_cmd[@]}"
      measure "$work/$name.theirs" "${theirs_cmd[@]}"
    else
      measure "$work/$name.theirs" "${theirs_cmd[@]}"
      measure "$work/$name.ours" "${ours_cmd[@]}"
    fi
  done
done

for name in identical varied; do
  # Every stack complete: the note line says how many; both list the chain.
  echo "-- $name"
  $R --store "$work/$name.store" report -1 | grep "^# \(DWARF unwinding\|  \)" || true
  echo "chain rows (recorder, perf): $($R --store "$work/$name.store" report -1 --children \
    --limit 60 | grep -c 'fr_\(deep\|vary\)_[elh][0-9o]')," \
    "$(perf report -i "$work/$name.perf.data" --children --stdio --sort sym -g none 2>/dev/null |
      grep -c 'fr_\(deep\|vary\)_[elh][0-9o]')"
  n1=$(eval echo "\$ours_$name"); n2=$(eval echo "\$theirs_$name")
  python3 - "$name" "$n1" "$n2" "$work/$name.ours" "$work/$name.theirs" <<'PY'
import statistics, sys
name, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [[list(map(float, l.split())) for l in open(f)] for f in sys.argv[4:6]]
def med(r, i): return statistics.median(x[i] for x in r)
for who, n, r in (("recorder report --children", n1, rows[0]), ("perf report --children", n2, rows[1])):
    print(f"{who:28s} {n} samples: wall {med(r, 0):.2f} s ({min(x[0] for x in r):.2f}-{max(x[0] for x in r):.2f}), "
          f"CPU {med(r, 2):.2f} s ({min(x[2] for x in r):.2f}-{max(x[2] for x in r):.2f}), "
          f"peak RSS {max(x[1] for x in r) / 1024:.0f} MiB")
q1 = n1 / max(med(rows[0], 2), 1e-3); q2 = n2 / max(med(rows[1], 2), 1e-3)
w1 = n1 / max(med(rows[0], 0), 1e-3); w2 = n2 / max(med(rows[1], 0), 1e-3)
print(f"{name}: ratio per sample (recorder / perf): {q1 / q2:.1f}x CPU, {w1 / w2:.1f}x wall   (goal >= 10x CPU)")
PY
done
