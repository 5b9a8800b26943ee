#!/usr/bin/env bash
# Reading a record vs samples in it (issue 17): `recorder report`, `recorder
# script` and `recorder export -f pprof` against `perf report --stdio --sort
# sym` and `perf script`: wall time, CPU time (user+sys: on a loaded host
# the wall time is mostly waiting for a CPU) and peak RSS (/usr/bin/time), on
# the same workload recorded by each tool at the same rate.
#
# The workload is one `fr_spin N rounds` per CPU: a fixed amount of work, not
# a duration, so each record holds the same samples (CPU time x HZ) however
# busy the host is; N comes from a calibration record (samples per round).
# Frame-pointer call graphs, cpu-clock (hrtimer) at HZ, 100 kHz by default:
# the kernel's floor for an hrtimer period is 10 us, so 100 kHz is the most
# one CPU gives, and 10 M samples take 100 CPU seconds per tool. For the run,
# kernel.perf_event_max_sample_rate is raised to 2 x HZ (at HZ = 100 kHz and
# CONFIG_HZ=250 the default 100 000 allows 400 samples per tick, which the
# kernel's throttle reaches); it is put back on exit. perf_cpu_time_max_percent
# is left alone: only PMU interrupt handlers report to it
# (perf_sample_event_took), not the cpu-clock hrtimer.
#
# Each point is recorded once per tool, then read ROUNDS times (alternating
# order; median time, max RSS), or ROUNDS_BIG times (default 1) where the
# record holds >= 2 M samples. The x axis is the samples each record really
# holds. Writes DIR/report_curve.dat and DIR/report_curve{,_rss}.png.
# Scratch (records, perf.data: ~1.5 GB at 10 M samples) is in /var/tmp.
# SAMPLES_LIST are targets: the records hold 75-105% of them (a sample's
# cost, hence samples per round, varies with the host's load). A target of
# 10 M takes ~7 minutes of recording per tool at ~25 k samples/s (a load of
# 8-10 on 2 CPUs).
# Usage (root): bench/report/bench_report_curve.sh [SAMPLES_LIST] [HZ] [ROUNDS] [DIR]
#   defaults: 10000,100000,1000000,4000000 100000 2 bench-out; ROUNDS_BIG=1
source "$(dirname "$0")/../common.sh"
TARGETS=${1:-10000,100000,1000000,4000000}
HZ=${2:-100000}
ROUNDS=${3:-2}
OUT=${4:-bench-out}
ROUNDS_BIG=${ROUNDS_BIG:-1}
mkdir -p "$OUT"
IFS=, read -r -a targets <<< "$TARGETS"
max_target=$(printf '%s\n' "${targets[@]}" | sort -n | tail -1)
# ~100 bytes a sample in perf.data, ~90 in our ring, a little in the store.
need_mb=$((max_target * 250 / 1000000 + 200))
avail_mb=$(df -Pm /var/tmp | awk 'NR == 2 {print $4}')
if [ "$avail_mb" -lt "$need_mb" ]; then
  echo "need ~${need_mb} MiB free in /var/tmp, have ${avail_mb}" >&2
  exit 1
fi
bench_workdir /var/tmp/flightrec-bench-rcurve.XXXXXX
R=("$B/recorder/cli/recorder" --store "$work/store")

rate_file=/proc/sys/kernel/perf_event_max_sample_rate
old_rate=$(cat "$rate_file")
bench_cleanup() { echo "$old_rate" > "$rate_file"; }
if [ "$old_rate" -lt $((2 * HZ)) ]; then echo $((2 * HZ)) > "$rate_file"; fi

measure() {  # measure NAME CMD...: appends "NAME wall_s peak_rss_kb cpu_s" to $work/m
  local name=$1
  shift
  /usr/bin/time -f "%e %M %U %S" -o "$work/t" "$@" > /dev/null 2> "$work/err" || {
    cat "$work/err" >&2
    exit 1
  }
  echo "$name $(awk '{print $1, $2, $3 + $4}' "$work/t")" >> "$work/m"
}

# Calibration: samples per fr_spin round at HZ, from a short record by our
# tool (sampling at 10 us periods costs this VM several us a sample, which the
# workload's CPU time includes, so a round holds more samples than its
# unsampled CPU time x HZ).
cal_rounds=400
cal_work="for i in \$(seq $ncpu); do $B/tests/programs/fr_spin $cal_rounds rounds >/dev/null & done; wait"
"${R[@]}" record -F "$HZ" --ring-pages 16384 --history 3600s --last 3600s --always \
  -- sh -c "$cal_work" 2> "$work/rec.log" || {
  cat "$work/rec.log"
  exit 1
}
cal=$("${R[@]}" info -1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["samples"])')
rm -rf "$work/store"
per_round=$(awk -v s="$cal" -v r=$cal_rounds -v n="$ncpu" 'BEGIN {print s / (r * n)}')
echo "# calibration: ${per_round} samples per fr_spin round per process at ${HZ} Hz"

dat="$OUT/report_curve.dat"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $ncpu CPUs, ${HZ} Hz, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# samples_ours samples_perf | report script pprof perf_report perf_script: wall s | RSS MiB | CPU s (user+sys) | rounds" > "$dat"
printf '%9s %9s | %8s %8s %8s %11s %11s | RSS MiB: %6s %6s %6s %8s %8s | rounds, record s: ours perf\n' \
  ours perf report script pprof "perf report" "perf script" report script pprof p.report p.script
for target in "${targets[@]}"; do
  rounds=$(awk -v t="$target" -v n="$ncpu" -v p="$per_round" \
    'BEGIN {r = int(t / (n * p) + 0.5); print r < 1 ? 1 : r}')
  workload="for i in \$(seq $ncpu); do $B/tests/programs/fr_spin $rounds rounds >/dev/null & done; wait"
  # Ring per CPU: the record's bytes with room for an uneven split, in pages
  # (a power of two, at least 16384 = 64 MiB).
  pages=16384
  while [ $((pages * 4096)) -lt $((target * 90 * 3 / 2 / ncpu)) ]; do pages=$((pages * 2)); done
  t0=$(date +%s.%N)
  "${R[@]}" record -F "$HZ" --ring-pages "$pages" --history 3600s --last 3600s --always \
    -- sh -c "$workload" 2> "$work/rec.log" || {
    cat "$work/rec.log"
    exit 1
  }
  t1=$(date +%s.%N)
  ours=$("${R[@]}" info -1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["meta"]["samples"])')
  # -N: perf 6.1 on a 6.18 host has been seen to abort in util/build-id.c
  # without it, and even with it now and then at the end of a record of a
  # few 100 k samples: up to 3 tries. Not -q: its last line says how many
  # samples it wrote.
  for try in 1 2 3; do
    rm -f "$work/perf.data"
    if perf record -N -F "$HZ" -g -o "$work/perf.data" -- sh -c "$workload" 2> "$work/perf.log"; then
      break
    fi
    echo "# perf record failed (try $try): $(grep -v '^\[' "$work/perf.log" | tail -2 | tr '\n' ' ')" >&2
    if [ "$try" = 3 ]; then exit 1; fi
  done
  t2=$(date +%s.%N)
  theirs=$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' "$work/perf.log")
  if [ -z "$theirs" ]; then theirs=$(perf script -i "$work/perf.data" -F tid 2> /dev/null | wc -l); fi
  # The records were just written: let their writeback finish before timing.
  sync
  n=$ROUNDS
  if [ "$ours" -ge 2000000 ] || [ "$theirs" -ge 2000000 ]; then n=$ROUNDS_BIG; fi
  : > "$work/m"
  for r in $(seq "$n"); do
    if [ $((r % 2)) -eq 1 ]; then
      measure report "${R[@]}" report -1
      measure perf_report perf report -i "$work/perf.data" --stdio --sort sym
      measure script "${R[@]}" script -1
      measure perf_script perf script -i "$work/perf.data"
      measure pprof "${R[@]}" export -1 -f pprof -o "$work/p.pb.gz"
    else
      measure perf_script perf script -i "$work/perf.data"
      measure pprof "${R[@]}" export -1 -f pprof -o "$work/p.pb.gz"
      measure perf_report perf report -i "$work/perf.data" --stdio --sort sym
      measure script "${R[@]}" script -1
      measure report "${R[@]}" report -1
    fi
  done
  python3 - "$ours" "$theirs" "$work/m" "$dat" "$n" \
    "$(awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {printf "%.0f %.0f", b - a, c - b}')" << 'PY'
import sys, statistics
ours, theirs, path, dat, n, rec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
t, m, c = {}, {}, {}
for line in open(path):
    name, secs, rss, cpu = line.split()
    t.setdefault(name, []).append(float(secs))
    c.setdefault(name, []).append(float(cpu))
    m[name] = max(m.get(name, 0), int(rss))
names = ["report", "script", "pprof", "perf_report", "perf_script"]
med = {k: statistics.median(t[k]) for k in names}
cpu = {k: statistics.median(c[k]) for k in names}
print(f"{ours:9d} {theirs:9d} | " + " ".join(f"{med[k]:8.2f}" if i < 3 else f"{med[k]:11.2f}" for i, k in enumerate(names))
      + " | RSS MiB: " + " ".join(f"{m[k]/1024:6.0f}" if i < 3 else f"{m[k]/1024:8.0f}" for i, k in enumerate(names))
      + f" | {n}, {rec}\n{'':19} CPU s: " + " ".join(f"{cpu[k]:8.2f}" if i < 3 else f"{cpu[k]:11.2f}" for i, k in enumerate(names)), flush=True)
with open(dat, "a") as f:
    f.write(f"{ours} {theirs} " + " ".join(f"{med[k]:.3f}" for k in names) + " "
            + " ".join(f"{m[k]/1024:.1f}" for k in names) + " "
            + " ".join(f"{cpu[k]:.2f}" for k in names) + f" {n}\n")
PY
  # Free the disk before the next, larger point.
  rm -f "$work/perf.data" "$work/p.pb.gz"
  rm -rf "$work/store"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# perf's points are drawn at perf's own sample counts (column 2).
awk '!/^#/ {print $2, $6, $7, $11, $12, $16, $17}' "$dat" > "$OUT/report_curve_perf.dat"
gnuplot << GP
set terminal pngcairo size 720,440 font ",10"
set logscale xy
set grid
set key top left
set xlabel 'samples in the record'
set output '$OUT/report_curve.png'
set title 'Reading a record: time vs samples (median of $ROUNDS, $ROUNDS_BIG at >= 2 M; solid CPU, dashed wall)'
set ylabel 'seconds'
plot '$dat' using 1:13 w lp lw 2 lc 1 t 'recorder report', '' using 1:14 w lp lw 2 lc 2 t 'recorder script', \
  '' using 1:15 w lp lw 2 lc 3 t 'recorder export -f pprof', \
  '$OUT/report_curve_perf.dat' using 1:6 w lp lw 2 lc 4 t 'perf report', '' using 1:7 w lp lw 2 lc 7 t 'perf script', \
  '$dat' using 1:3 w l dt 2 lc 1 notitle, '' using 1:4 w l dt 2 lc 2 notitle, '' using 1:5 w l dt 2 lc 3 notitle, \
  '$OUT/report_curve_perf.dat' using 1:2 w l dt 2 lc 4 notitle, '' using 1:3 w l dt 2 lc 7 notitle
set output '$OUT/report_curve_rss.png'
set title 'Reading a record: peak RSS vs samples'
set ylabel 'peak RSS (MiB)'
plot '$dat' using 1:8 w lp lw 2 t 'recorder report', '' using 1:9 w lp lw 2 t 'recorder script', \
  '' using 1:10 w lp lw 2 t 'recorder export -f pprof', \
  '$OUT/report_curve_perf.dat' using 1:4 w lp lw 2 t 'perf report', '' using 1:5 w lp lw 2 t 'perf script'
GP
echo "plot: $OUT/report_curve.png $OUT/report_curve_rss.png"
