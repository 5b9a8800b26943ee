#!/usr/bin/env bash
# Reading a record vs samples in it (issue 17): `recorder report`, `recorder
# script` and `recorder export -f pprof` against `perf report --stdio --sort
# sym` and `perf script`, time and peak RSS (/usr/bin/time %M), on the same
# workload (one fr_spin per CPU, frame-pointer call graphs, same rate)
# recorded by each tool for each duration, so the sample counts match
# within a few percent. ROUNDS rounds, alternating order, median time, max
# RSS. The x axis is the samples each record really holds (a loaded host
# gives the workload less CPU, so fewer samples than SECONDS x HZ x CPUs).
# Writes DIR/report_curve.dat and DIR/report_curve{,_rss}.png.
# Usage (root): bench/report/bench_report_curve.sh [SECONDS_LIST] [HZ] [ROUNDS] [DIR]
source "$(dirname "$0")/../common.sh"
SECS_LIST=${1:-0.25,1,5,25}
HZ=${2:-20000}
ROUNDS=${3:-2}
OUT=${4:-bench-out}
mkdir -p "$OUT"
bench_workdir /var/tmp/flightrec-bench-rcurve.XXXXXX
R="$B/recorder/cli/recorder --store $work/store"

measure() {  # measure NAME CMD...: appends "NAME seconds peak_rss_kb" to $work/m
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$work/t" "$@" > /dev/null 2> "$work/err" || {
    cat "$work/err" >&2
    exit 1
  }
  echo "$name $(cat "$work/t")" >> "$work/m"
}

dat="$OUT/report_curve.dat"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $ncpu CPUs, ${HZ} Hz, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# samples_ours samples_perf | report script pprof perf_report perf_script (s) | same (RSS MiB)" > "$dat"
printf '%9s %9s | %8s %8s %8s %11s %11s | RSS MiB: %6s %6s %6s %8s %8s\n' ours perf report \
  script pprof "perf report" "perf script" report script pprof p.report p.script
IFS=, read -r -a secs_list <<< "$SECS_LIST"
for secs in "${secs_list[@]}"; do
  workload="for i in \$(seq $ncpu); do $B/tests/programs/fr_spin $secs >/dev/null & done; wait"
  $R record -F "$HZ" --ring-pages 16384 --history "$(python3 -c "print(int($secs) + 10)")s" \
    --last "$(python3 -c "print(int($secs) + 10)")s" --always -- sh -c "$workload" \
    2> "$work/rec.log" || {
    cat "$work/rec.log"
    exit 1
  }
  ours=$($R info -1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["samples"])')
  rm -f "$work/perf.data"
  # -N: perf 6.1 on a 6.18 host has been seen to abort in util/build-id.c without it.
  perf record -q -N -F "$HZ" -g -o "$work/perf.data" -- sh -c "$workload" 2> "$work/perf.log"
  theirs=$(perf script -i "$work/perf.data" -F tid 2> /dev/null | wc -l)
  : > "$work/m"
  for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
      measure report $R report -1
      measure perf_report perf report -i "$work/perf.data" --stdio --sort sym
      measure script $R script -1
      measure perf_script perf script -i "$work/perf.data"
      measure pprof $R export -1 -f pprof -o "$work/p.pb.gz"
    else
      measure perf_script perf script -i "$work/perf.data"
      measure pprof $R export -1 -f pprof -o "$work/p.pb.gz"
      measure perf_report perf report -i "$work/perf.data" --stdio --sort sym
      measure script $R script -1
      measure report $R report -1
    fi
  done
  python3 - "$ours" "$theirs" "$work/m" "$dat" << 'PY'
import sys, statistics
ours, theirs, path, dat = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
t, m = {}, {}
for line in open(path):
    name, secs, rss = line.split()
    t.setdefault(name, []).append(float(secs))
    m[name] = max(m.get(name, 0), int(rss))
names = ["report", "script", "pprof", "perf_report", "perf_script"]
med = {k: statistics.median(t[k]) for k in names}
print(f"{ours:9d} {theirs:9d} | " + " ".join(f"{med[k]:8.2f}" if i < 3 else f"{med[k]:11.2f}" for i, k in enumerate(names))
      + " | RSS MiB: " + " ".join(f"{m[k]/1024:6.0f}" if i < 3 else f"{m[k]/1024:8.0f}" for i, k in enumerate(names)))
with open(dat, "a") as f:
    f.write(f"{ours} {theirs} " + " ".join(f"{med[k]:.3f}" for k in names) + " "
            + " ".join(f"{m[k]/1024:.1f}" for k in names) + "\n")
PY
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# perf's points are drawn at perf's own sample counts (column 2).
awk '!/^#/ {print $2, $6, $7, $11, $12}' "$dat" > "$work/perf.dat"
cp "$work/perf.dat" "$OUT/report_curve_perf.dat"
gnuplot << GP
set terminal pngcairo size 720,440 font ",10"
set logscale xy
set grid
set key top left
set xlabel 'samples in the record'
set output '$OUT/report_curve.png'
set title 'Reading a record: time vs samples (median of $ROUNDS, $ncpu CPUs)'
set ylabel 'seconds'
plot '$dat' using 1:3 w lp lw 2 t 'recorder report', '' using 1:4 w lp lw 2 t 'recorder script', \
  '' using 1:5 w lp lw 2 t 'recorder export -f pprof', \
  '$OUT/report_curve_perf.dat' using 1:2 w lp lw 2 t 'perf report', '' using 1:3 w lp lw 2 t 'perf script'
set output '$OUT/report_curve_rss.png'
set title 'Reading a record: peak RSS vs samples'
set ylabel 'peak RSS (MiB)'
plot '$dat' using 1:8 w lp lw 2 t 'recorder report', '' using 1:9 w lp lw 2 t 'recorder script', \
  '' using 1:10 w lp lw 2 t 'recorder export -f pprof', \
  '$OUT/report_curve_perf.dat' using 1:4 w lp lw 2 t 'perf report', '' using 1:5 w lp lw 2 t 'perf script'
GP
echo "plot: $OUT/report_curve.png $OUT/report_curve_rss.png"
