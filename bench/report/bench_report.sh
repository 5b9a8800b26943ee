#!/usr/bin/env bash
# Report throughput, side by side in one run (root needed):
#   recorder report over a record of >= 1M samples, vs
#   perf report --stdio --sort sym over a perf.data of the same workload
#   recorded at the same rate, with the same number of samples (±5%).
# Prints samples per second of each, their ratio, and peak RSS of each.
# Usage: bench/report/bench_report.sh [SECONDS] [HZ] [ROUNDS]
source "$(dirname "$0")/../common.sh"
SECS=${1:-32}
HZ=${2:-20000}
ROUNDS=${3:-3}
bench_workdir /tmp/flightrec-bench-report.XXXXXX
R="$B/recorder/cli/recorder --store $work/store"
# One fr_spin per CPU (spin_a ~70%, spin_b ~30%), so both tools see the same
# mix of user, library and kernel frames.
workload="for i in \$(seq $ncpu); do $B/tests/programs/fr_spin $SECS >/dev/null & done; wait"

echo "== workload: $ncpu x fr_spin ${SECS}s at ${HZ} Hz, call graphs (frame pointers)"
# Rings sized for the whole run: 64 MiB per CPU of 4 KiB pages.
$R record -F "$HZ" --ring-pages 16384 --history "$((SECS + 10))s" --last "$((SECS + 10))s" \
  --always -- sh -c "$workload" 2>"$work/rec.log" || { cat "$work/rec.log"; exit 1; }
ours=$($R info -1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["samples"])')
perf record -q -F "$HZ" -g -o "$work/perf.data" -- sh -c "$workload" 2>"$work/perf.log"
theirs_exact=$(perf script -i "$work/perf.data" -F tid 2>/dev/null | wc -l)
echo "samples: recorder record ${ours}, perf record ${theirs_exact}"
if [ "$ours" -lt 1000000 ] || [ "$theirs_exact" -lt 1000000 ]; then
  echo "warning: fewer than 1M samples; raise SECONDS or HZ" >&2
fi

# Runs a command, prints "seconds peak_rss_kb".
measure() {
  /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || {
    cat "$work/err" >&2; exit 1; }
  cat "$work/t"
}
: > "$work/ours"; : > "$work/theirs"
for r in $(seq "$ROUNDS"); do
  # Alternate the order so neither tool always runs with a warm page cache.
  if [ $((r % 2)) -eq 1 ]; then
    measure $R report -1 >> "$work/ours"
    measure perf report -i "$work/perf.data" --stdio --sort sym >> "$work/theirs"
  else
    measure perf report -i "$work/perf.data" --stdio --sort sym >> "$work/theirs"
    measure $R report -1 >> "$work/ours"
  fi
done
ot=$(awk '{print $1}' "$work/ours" | median); om=$(awk '{print $2}' "$work/ours" | sort -n | tail -1)
tt=$(awk '{print $1}' "$work/theirs" | median); tm=$(awk '{print $2}' "$work/theirs" | sort -n | tail -1)
python3 - "$ours" "$ot" "$om" "$theirs_exact" "$tt" "$tm" <<'PY'
import sys
n1, t1, m1, n2, t2, m2 = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
r1, r2 = n1 / max(t1, 1e-3), n2 / max(t2, 1e-3)
print(f"recorder report: {n1} samples in {t1:.2f} s = {r1/1e6:.2f} M samples/s, peak RSS {m1/1024:.0f} MiB")
print(f"perf report:     {n2} samples in {t2:.2f} s = {r2/1e6:.2f} M samples/s, peak RSS {m2/1024:.0f} MiB")
print(f"ratio (samples/s, recorder / perf): {r1/r2:.1f}x   (goal >= 10x)")
PY
