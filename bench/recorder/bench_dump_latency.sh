#!/usr/bin/env bash
# Dump latency vs window length and vs ring size (issue 17 item 1), recorderd
# side by side with `perf record --overwrite --switch-output=signal`. Root
# needed.
#
# The workload is one bench_work per CPU for the whole run (the box is fully
# busy). For each ring size (pages per CPU, a power of two; the same number
# for recorderd --ring-pages and perf -m):
#   * recorderd (perf backend, -F RATE, a private store and socket) is started
#     once; for each window W in increasing order the script waits, bounded,
#     until `recorder status --json` says the rings hold W seconds, or until
#     the rings are full (held stays below the daemon's uptime: a ring this
#     size cannot hold W), then times REPS x `recorder dump --last Ws --json`:
#     wall time of the CLI process, and the daemon's own took_ms (request to
#     committed record), with the record's sample count and covered seconds;
#   * perf has no window: a SIGUSR2 snapshot writes what its rings hold, and
#     in overwrite mode only what came since the previous snapshot. So for
#     each W a fresh `perf record --overwrite -a -g -F RATE -m PAGES
#     --switch-output=signal` is enabled through its control fifo (its
#     start-up is not counted), left W seconds, and signalled once; the time
#     is from the signal to perf's "[ perf record: Dump FILE ]" line on stderr
#     (printed after the file is written and renamed). Its sample count comes
#     from `perf report --stats` on that file, off the clock. -B: perf 6.1's
#     build-id pass aborts on this kernel (util/build-id.c:1010).
#
# Usage: bench/recorder/bench_dump_latency.sh [RING_PAGES] [WINDOWS_S] [RATE] [REPS] [DIR]
#   defaults: 128,1024,8192 pages (512 KiB, 4 MiB, 32 MiB per CPU),
#   1,5,15,60 s, 999 Hz, 3 dumps per point (median), bench-out.
# Writes DIR/dump_latency.tsv (one row per ring size and window),
# DIR/dump_latency.dat (the plot's columns) and DIR/dump_latency.png.
source "$(dirname "$0")/../common.sh"
IFS=, read -r -a RINGS <<< "${1:-128,1024,8192}"
IFS=, read -r -a WINDOWS <<< "${2:-1,5,15,60}"
RATE=${3:-999}
REPS=${4:-3}
OUT=${5:-bench-out}
WPIDS=()
DPID=""
PPID_=""
bench_cleanup() {
  local p
  for p in "${WPIDS[@]}" $DPID $PPID_; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
bench_workdir /tmp/flightrec-bench-dumplat.XXXXXX
for f in "$B/bench/recorder/bench_work" "$B/recorder/cli/recorder" "$B/recorder/daemon/recorderd"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $B recorder recorderd bench_work)" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "gnuplot missing (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
mkdir -p "$OUT"
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

# Milliseconds between two $EPOCHREALTIME values.
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f\n", (b - a) * 1000}'; }
# Field F of the JSON object on stdin (a number; "nan" if absent).
jfield() { python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("nan" if v is None else v)' "$1"; }

start_recorderd() {  # $1 = ring pages
  rm -rf "$work/store"
  "$B/recorder/daemon/recorderd" --backend perf -F "$RATE" --ring-pages "$1" --history 60s \
    --max-dumps-per-hour 10000 --max-dumps-per-uid-per-hour 10000 \
    --store "$work/store" --socket "$work/sock" >"$work/d.log" 2>&1 &
  DPID=$!
  for _ in $(seq 600); do $R status >/dev/null 2>&1 && return; sleep 0.05; done
  echo "recorderd did not start" >&2; cat "$work/d.log" >&2; exit 1
}
stop_pid() { kill -INT "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Waits (bounded: W + 60 s) until recorderd's rings hold W seconds or are
# full; prints the history held then.
wait_history() {  # $1 = W
  local deadline=$((SECONDS + $1 + 60)) st held
  while :; do
    st=$($R status --json)
    held=$(python3 -c '
import json, sys
s = json.load(sys.stdin)
held, up = s["history_held_s"], s["rings"]["uptime_s"]
w = float(sys.argv[1])
# held = min(uptime, ring bytes / byte rate): once it trails uptime by 2 s the
# ring has wrapped and will not hold more.
print(f"{held:.2f}" if held >= w or up - held > 2 else "")' "$1" <<< "$st")
    [ -n "$held" ] && { echo "$held"; return; }
    [ $SECONDS -lt $deadline ] || { echo "recorderd never held $1 s: $st" >&2; exit 1; }
    sleep 0.2
  done
}

# One perf snapshot after W seconds with a ring of PAGES; writes
# "MS SAMPLES BYTES" to $work/perf_point, or "nan nan nan" (and says why on
# stderr). Not run in a $(...) subshell, so that PPID_ is what the exit trap
# kills.
perf_point() {  # $1 = pages, $2 = W
  rm -rf "$work/perfout" "$work/ctl" "$work/ack" "$work/perr"
  mkdir "$work/perfout"
  mkfifo "$work/ctl" "$work/ack" "$work/perr"
  exec 9<>"$work/perr"  # read-write: opening does not wait for perf
  perf record --overwrite -a -g -F "$RATE" -m "$1" -B -D -1 --switch-output=signal \
    --control "fifo:$work/ctl,$work/ack" -o "$work/perfout/perf.data" -- sleep 3600 \
    >/dev/null 2>"$work/perr" &
  PPID_=$!
  local ack line t0 t1 file=""
  ack=$(cd "$work" && timeout 120 bash -c 'exec 7>ctl 8<ack; echo enable >&7; read -r a <&8; echo "$a"') || true
  if [ "$ack" != ack ]; then
    echo "perf did not acknowledge 'enable' (ring $1 pages)" >&2
    stop_pid "$PPID_"; PPID_=""; exec 9<&-; echo "nan nan nan" > "$work/perf_point"; return
  fi
  # The window itself: W seconds of history for perf to hold.
  sleep "$2"
  t0=$EPOCHREALTIME
  kill -USR2 "$PPID_"
  while IFS= read -r -t 60 line <&9; do
    if [[ $line == *"perf record: Dump "* ]]; then t1=$EPOCHREALTIME; file=${line#*Dump }; file=${file% ]}; break; fi
  done
  stop_pid "$PPID_"; PPID_=""
  exec 9<&-
  if [ -z "$file" ] || [ ! -f "$file" ]; then
    echo "perf wrote no snapshot within 60 s (ring $1 pages, W $2 s)" >&2
    echo "nan nan nan" > "$work/perf_point"; return
  fi
  local n
  n=$(timeout 120 perf report -i "$file" --stats 2>/dev/null | awk '/^ *SAMPLE events:/ {print $3; exit}') || true
  echo "$(ms_between "$t0" "$t1") ${n:-nan} $(stat -c %s "$file")" > "$work/perf_point"
  rm -rf "$work/perfout"
}

echo "== dump latency vs window: rings ${RINGS[*]} pages/CPU, windows ${WINDOWS[*]} s, $RATE Hz, $ncpu x bench_work"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); $(uptime | sed 's/.*load/load/')"
for i in $(seq "$ncpu"); do "$B/bench/recorder/bench_work" 100000000000000 >/dev/null & WPIDS+=($!); done
printf '# ring_pages\twindow_s\trec_held_s\trec_wall_ms\trec_took_ms\trec_samples\trec_covered_s\trec_bytes\tperf_ms\tperf_samples\tperf_bytes\n' \
  > "$OUT/dump_latency.tsv"
for pages in "${RINGS[@]}"; do
  start_recorderd "$pages"
  : > "$work/rec_$pages"
  for w in "${WINDOWS[@]}"; do
    held=$(wait_history "$w")
    : > "$work/walls"; : > "$work/tooks"
    for _ in $(seq "$REPS"); do
      t0=$EPOCHREALTIME
      $R dump --last "${w}s" --reason bench --json > "$work/dump.json"
      t1=$EPOCHREALTIME
      ms_between "$t0" "$t1" >> "$work/walls"
      jfield took_ms < "$work/dump.json" >> "$work/tooks"
    done
    echo "$w $held $(median < "$work/walls") $(median < "$work/tooks") $(jfield samples < "$work/dump.json")" \
      "$(jfield covered_s < "$work/dump.json") $(jfield bytes < "$work/dump.json")" >> "$work/rec_$pages"
  done
  stop_pid "$DPID"; DPID=""
  while read -r w held wall took n cov bytes; do
    perf_point "$pages" "$w"
    p=$(cat "$work/perf_point")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pages" "$w" "$held" "$wall" "$took" "$n" "$cov" "$bytes" \
      "$(tr ' ' '\t' <<< "$p")" >> "$OUT/dump_latency.tsv"
  done < "$work/rec_$pages"
  echo "   ring $pages pages done; $(uptime | sed 's/.*load/load/')"
done

python3 - "$OUT/dump_latency.tsv" "$OUT/dump_latency.dat" "$(getconf PAGESIZE)" <<'PY'
import math, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")]
page = int(sys.argv[3])
def f(x):
    try:
        return float(x)
    except ValueError:
        return math.nan
def num(x, fmt):
    v = f(x)
    return "—" if math.isnan(v) else format(v, fmt)
print("  ring/CPU | window | held s | recorderd: wall ms  took ms  samples  covered s  KiB | perf: ms  samples  KiB | took/perf")
for r in rows:
    ratio = f(r[4]) / f(r[8]) if f(r[8]) > 0 else math.nan
    print(f"  {int(r[0]) * page // 1024:6d} KiB | {r[1]:>4} s | {f(r[2]):6.1f} |"
          f" {f(r[3]):9.1f} {f(r[4]):8.1f} {num(r[5], '8.0f')} {f(r[6]):9.2f} {f(r[7]) / 1024:7.0f} |"
          f" {num(r[8], '8.1f')} {num(r[9], '8.0f')} {num(r[10], '6.0f') if r[10] == 'nan' else f'{f(r[10]) / 1024:6.0f}'} |"
          f" {num(ratio, '6.2f')}")
# The plot's table: one row per window, recorderd's took_ms then perf's ms per ring.
rings = sorted({int(r[0]) for r in rows})
wins = sorted({float(r[1]) for r in rows})
cell = {(int(r[0]), float(r[1])): r for r in rows}
with open(sys.argv[2], "w") as out:
    out.write("# window_s" + "".join(f"\trec_took_ms@{p}" for p in rings) + "".join(f"\tperf_ms@{p}" for p in rings) + "\n")
    for w in wins:
        c = [cell.get((p, w)) for p in rings]
        out.write(f"{w:g}" + "".join(f"\t{x[4] if x else 'nan'}" for x in c)
                  + "".join(f"\t{x[8] if x else 'nan'}" for x in c) + "\n")
PY
series=()
n=${#RINGS[@]}
for i in "${!RINGS[@]}"; do
  kib=$((RINGS[i] * $(getconf PAGESIZE) / 1024))
  series+=("$((i + 2)):recorderd, ring ${kib} KiB/CPU" "$((i + 2 + n)):perf --switch-output, ring ${kib} KiB/CPU")
done
bench_plot "$OUT/dump_latency.png" "Dump latency vs window ($RATE Hz, both CPUs busy)" \
  'window asked (s)' 'dump latency (ms)' "$OUT/dump_latency.dat" "${series[@]}"
echo "  table: $OUT/dump_latency.tsv"
