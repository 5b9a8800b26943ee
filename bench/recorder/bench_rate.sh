#!/usr/bin/env bash
# recorderd's slowdown vs sampling rate, side by side with
# `perf record --overwrite -a -g` at the same rate (issue 17: the curve of
# item 1 and the 4 999 Hz ratio of item 4). Root needed.
#
# The workload is one bench_work per CPU (the box is fully busy). For each
# round, each rate, the three contenders run in a rotated order: nothing,
# recorderd -F RATE (its defaults otherwise: fp call chains, 30 s of history),
# perf record --overwrite -a -g -F RATE. Two slowdowns are reported:
#   * wall: the slowest worker's wall time, as bench_recorder.sh measures it;
#     on a shared, loaded machine it moves with everyone else's load;
#   * CPU: the workers' CPU time (wait4: on this kernel, without
#     CONFIG_IRQ_TIME_ACCOUNTING, the sampling interrupt is charged to the task
#     it interrupts) plus the contender's own CPU time during the job (every
#     thread's /proc schedstat), over the workers' CPU time with nothing: what
#     the recording costs the machine, which other jobs do not move.
# perf is started with its events disabled and enabled through its control
# fifo (--control, -D -1), so its start-up (reading /proc and kallsyms, which
# takes seconds on a loaded machine) is neither counted nor leaves part of the
# job unsampled; recorderd samples from before its socket answers. -B:
# perf 6.1's build-id pass at exit aborts on this kernel (util/build-id.c:1010).
#
# Usage: bench/recorder/bench_rate.sh [ROUNDS] [ITERATIONS] [RATE...]
#   defaults: 3 rounds, 10^9 hash steps per worker, rates 99 999 4999 9999 Hz.
# Prints a table, writes it to $B/bench/recorder/rate_curve.tsv and draws
# $B/bench/recorder/rate_curve.png (gnuplot).
source "$(dirname "$0")/../common.sh"
ROUNDS=${1:-3}
ITERS=${2:-1000000000}
RATES=("${@:3}")
[ "${#RATES[@]}" -gt 0 ] || RATES=(99 999 4999 9999)
bench_cleanup() { pkill -P $$ 2>/dev/null || true; }
bench_workdir /tmp/flightrec-bench-rate.XXXXXX
for f in "$B/bench/recorder/bench_work" "$B/recorder/cli/recorder" "$B/recorder/daemon/recorderd"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $B recorder recorderd bench_work)" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "gnuplot missing (scripts/setup.sh installs gnuplot-nox)" >&2; exit 1; }
out_dir="$B/bench/recorder"
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

# Starts ncpu workers, waits for them all; prints "WALL CPU": the slowest
# worker's wall seconds (from bench_work itself) and the CPU seconds of all
# of them (wait4).
cat > "$work/workers.py" <<'PY'
import os, sys
n, cmd = int(sys.argv[1]), sys.argv[2:]
pids, reads = [], []
for _ in range(n):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execv(cmd[0], cmd)
    os.close(w)
    pids.append(pid)
    reads.append(r)
cpu, wall = 0.0, 0.0
for pid, r in zip(pids, reads):
    _, status, ru = os.wait4(pid, 0)
    text = os.read(r, 4096).decode()
    if status != 0 or not text.strip():
        sys.exit(f"worker failed: status {status}")
    cpu += ru.ru_utime + ru.ru_stime
    wall = max(wall, float(text.split()[0]))
print(f"{wall:.4f} {cpu:.4f}")
PY

# CPU nanoseconds of every thread of PID so far (0 for no PID).
cpu_ns() {
  [ -n "$1" ] || { echo 0; return; }
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}

CPID=""
start_contender() {  # $1 = none|recorderd|perf, $2 = rate
  CPID=""
  case $1 in
    recorderd)
      "$B/recorder/daemon/recorderd" -F "$2" --store "$work/store" --socket "$work/sock" \
        >"$work/d.log" 2>&1 &
      CPID=$!
      for _ in $(seq 600); do $R status >/dev/null 2>&1 && return; sleep 0.05; done
      echo "recorderd did not start" >&2; cat "$work/d.log" >&2; exit 1 ;;
    perf)
      rm -f "$work/ctl" "$work/ack"; mkfifo "$work/ctl" "$work/ack"
      perf record --overwrite -a -g -F "$2" -o "$work/perf.data" -q -B -D -1 \
        --control "fifo:$work/ctl,$work/ack" -- sleep 3600 >"$work/p.log" 2>&1 &
      CPID=$!
      # The opens block until perf has opened its ends; timeout bounds it all.
      local ack
      ack=$(cd "$work" && timeout 120 bash -c 'exec 7>ctl 8<ack; echo enable >&7; read -r a <&8; echo "$a"') || true
      [ "$ack" = ack ] || { echo "perf did not acknowledge 'enable'" >&2; cat "$work/p.log" >&2; exit 1; } ;;
  esac
}
stop_contender() {
  [ -n "$CPID" ] || return 0
  kill -INT "$CPID" 2>/dev/null || true
  local st=0
  wait "$CPID" || st=$?
  # recorderd exits 0; perf passes on its workload's status (it ends
  # `sleep` with SIGTERM: 143).
  if [ "$st" != 0 ] && [ "$st" != 143 ]; then echo "contender exited with $st" >&2; exit 1; fi
  rm -f "$work/perf.data"
}

contenders=(none recorderd perf)
echo "== slowdown vs rate: $ncpu x bench_work $ITERS, rates ${RATES[*]} Hz, $ROUNDS rounds, rotated order"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); $(uptime | sed 's/.*load/load/')"
: > "$work/raw"
for r in $(seq "$ROUNDS"); do
  for i in "${!RATES[@]}"; do
    rate=${RATES[$i]}
    for k in 0 1 2; do
      c=${contenders[$(((r + i + k) % 3))]}
      start_contender "$c" "$rate"
      d0=$(cpu_ns "$CPID")
      res=$(python3 "$work/workers.py" "$ncpu" "$B/bench/recorder/bench_work" "$ITERS")
      d1=$(cpu_ns "$CPID")
      stop_contender
      echo "$rate $c $res $(((d1 - d0) / 1000))" >> "$work/raw"
    done
  done
  echo "   round $r done; $(uptime | sed 's/.*load/load/')"
done

cp "$work/raw" "$out_dir/rate_curve.raw"  # RATE CONTENDER WALL_S CPU_S OWN_CPU_US per job
python3 - "$work/raw" "$out_dir/rate_curve.tsv" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
rates = sorted({int(r[0]) for r in rows})
def med(rate, who, f):
    return st.median(f(r) for r in rows if int(r[0]) == rate and r[1] == who)
wall = lambda r: float(r[2])
cpu = lambda r: float(r[3]) + int(r[4]) / 1e6   # workers + the contender itself
own = lambda r: int(r[4]) / 1e6
print("  rate Hz | wall: nothing  recorderd  perf    | ratio | CPU: nothing  recorderd  perf    | ratio | own CPU: recorderd  perf")
tsv = ["# rate_hz\trecorderd_wall_%\tperf_wall_%\trecorderd_cpu_%\tperf_cpu_%\trecorderd_own_s\tperf_own_s"]
for rate in rates:
    bw, bc = med(rate, "none", wall), med(rate, "none", cpu)
    sw = {w: (med(rate, w, wall) / bw - 1) * 100 for w in ("recorderd", "perf")}
    sc = {w: (med(rate, w, cpu) / bc - 1) * 100 for w in ("recorderd", "perf")}
    ratio = lambda s: f"{s['recorderd'] / s['perf']:5.2f}" if s["perf"] > 0 else "  n/a"
    print(f"  {rate:7d} | {bw:7.3f} s {sw['recorderd']:+8.2f}% {sw['perf']:+8.2f}% | {ratio(sw)} |"
          f" {bc:7.3f} s {sc['recorderd']:+8.2f}% {sc['perf']:+8.2f}% | {ratio(sc)} |"
          f" {med(rate, 'recorderd', own):8.3f} s {med(rate, 'perf', own):7.3f} s")
    tsv.append(f"{rate}\t{sw['recorderd']:.3f}\t{sw['perf']:.3f}\t{sc['recorderd']:.3f}\t{sc['perf']:.3f}"
               f"\t{med(rate, 'recorderd', own):.4f}\t{med(rate, 'perf', own):.4f}")
open(sys.argv[2], "w").write("\n".join(tsv) + "\n")
print("  (medians over rounds; ratio = recorderd's slowdown / perf's; own CPU = the contender's CPU during the job)")
print("  ranges over rounds, CPU seconds (workers + contender):")
for rate in rates:
    parts = []
    for who in ("none", "recorderd", "perf"):
        v = sorted(cpu(r) for r in rows if int(r[0]) == rate and r[1] == who)
        parts.append(f"{who} {v[0]:.3f}-{v[-1]:.3f}")
    print(f"  {rate:7d} | " + ", ".join(parts))
PY
gnuplot <<GP
set terminal pngcairo size 760,460 font ",10"
set output '$out_dir/rate_curve.png'
set title 'Slowdown of a CPU-bound job (one per CPU) vs sampling rate'
set xlabel 'sampling rate per CPU (Hz)'
set ylabel 'slowdown (%)'
set logscale xy
set grid
set key top left
plot '$out_dir/rate_curve.tsv' using 1:4 with linespoints lw 2 title 'recorderd (CPU)', \
     '' using 1:5 with linespoints lw 2 title 'perf record --overwrite -a -g (CPU)', \
     '' using 1:2 with linespoints dt 2 title 'recorderd (wall)', \
     '' using 1:3 with linespoints dt 2 title 'perf record --overwrite -a -g (wall)'
GP
echo "  table: $out_dir/rate_curve.tsv   plot: $out_dir/rate_curve.png   every job: $out_dir/rate_curve.raw"
