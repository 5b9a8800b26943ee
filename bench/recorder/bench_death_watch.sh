#!/usr/bin/env bash
# What recorderd's death watch costs during a fork-exit storm: recorderd's
# own CPU time (every thread's /proc schedstat) while bench_storm runs RATE
# children a second for SECONDS, with --deaths on and with --deaths off, side
# by side with `perf record -a -e sched:sched_process_exec,sched_process_fork,
# sched_process_exit,signal:signal_generate` (a tracer following the same
# events; -B: perf 6.1's build-id pass at exit aborts on this kernel). The
# storm's mode kill makes one child in ten die by SIGKILL: deaths recorderd
# stores (rate-limited by its dump budgets), so the cost of storing is in the
# figure too. Two costs per 1000 children: the contender's own CPU, and the
# storm's CPU (the children's, where a tracer's kernel-side work of writing
# each event is charged) over the storm's CPU with --deaths off. Root needed.
#
# Usage: bench/recorder/bench_death_watch.sh [ROUNDS] [RATE] [SECONDS] [MODE]
#   defaults: 3 rounds, 1000 children/s, 10 s, kill.
source "$(dirname "$0")/../common.sh"
ROUNDS=${1:-3}
RATE=${2:-1000}
SECONDS_=${3:-10}
MODE=${4:-kill}
bench_cleanup() { pkill -P $$ 2>/dev/null || true; }
bench_workdir /tmp/flightrec-bench-deaths.XXXXXX
for f in "$B/bench/recorder/bench_storm" "$B/recorder/cli/recorder" "$B/recorder/daemon/recorderd"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $B recorder recorderd bench_storm)" >&2; exit 1; }
done
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'; }

CPID=""
start_contender() {  # $1 = deaths-on|deaths-off|perf
  case $1 in
    deaths-*)
      rm -rf "$work/store"
      "$B/recorder/daemon/recorderd" --deaths "${1#deaths-}" --store "$work/store" \
        --socket "$work/sock" >"$work/d.log" 2>&1 &
      CPID=$!
      for _ in $(seq 600); do $R status >/dev/null 2>&1 && return; sleep 0.05; done
      echo "recorderd did not start" >&2; cat "$work/d.log" >&2; exit 1 ;;
    perf)
      rm -f "$work/ctl" "$work/ack"; mkfifo "$work/ctl" "$work/ack"
      perf record -a -q -B -D -1 --control "fifo:$work/ctl,$work/ack" -o "$work/perf.data" \
        -e sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit,signal:signal_generate \
        -- sleep 3600 >"$work/p.log" 2>&1 &
      CPID=$!
      local ack
      ack=$(cd "$work" && timeout 120 bash -c 'exec 7>ctl 8<ack; echo enable >&7; read -r a <&8; echo "$a"') || true
      [ "$ack" = ack ] || { echo "perf did not acknowledge 'enable'" >&2; cat "$work/p.log" >&2; exit 1; } ;;
  esac
}
stop_contender() {
  local st=0
  if [ "$1" = deaths-on ]; then
    $R status --json > "$work/status.json" 2>/dev/null || true
  fi
  kill -INT "$CPID" 2>/dev/null || true
  wait "$CPID" || st=$?
  if [ "$st" != 0 ] && [ "$st" != 143 ]; then echo "$1 exited with $st" >&2; exit 1; fi
  rm -f "$work/perf.data"
}

contenders=(deaths-off deaths-on perf)
echo "== death watch during a fork-exit storm: $RATE children/s for $SECONDS_ s (mode $MODE), $ROUNDS rounds"
echo "   $(date -u '+%Y-%m-%d %H:%M UTC'); $(uptime | sed 's/.*load/load/')"
: > "$work/raw"
for r in $(seq "$ROUNDS"); do
  for k in 0 1 2; do
    c=${contenders[$(((r + k) % 3))]}
    start_contender "$c"
    d0=$(cpu_ns "$CPID")
    res=$("$B/bench/recorder/bench_storm" "$RATE" "$SECONDS_" "$MODE")
    d1=$(cpu_ns "$CPID")
    stop_contender "$c"
    echo "$c $res $(((d1 - d0) / 1000))" >> "$work/raw"
    if [ "$c" = deaths-on ] && [ -s "$work/status.json" ]; then
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])).get("deaths",{}); print("   deaths:", {k: d[k] for k in d if not isinstance(d[k], dict)})' "$work/status.json" || true
    fi
  done
  echo "   round $r done; $(uptime | sed 's/.*load/load/')"
done
python3 - "$work/raw" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
# CONTENDER CHILDREN RATE STORM_CPU_S OWN_CPU_US
def med(who, f): return st.median(f(r) for r in rows if r[0] == who)
per_k = lambda i: (lambda r: float(r[i]) / float(r[1]) * 1000)
print("  contender    | children/s | own CPU ms / 1000 children | storm CPU ms / 1000 children")
for who in ("deaths-off", "deaths-on", "perf"):
    print(f"  {who:<12} | {med(who, lambda r: float(r[2])):10.0f} | "
          f"{med(who, lambda r: float(r[4]) / 1e3 / float(r[1]) * 1000):26.1f} | "
          f"{med(who, per_k(3)) * 1000:28.1f}")
own = lambda who: med(who, lambda r: float(r[4]) / 1e3 / float(r[1]) * 1000)
storm = lambda who: med(who, per_k(3)) * 1000
watch = own("deaths-on") - own("deaths-off") + storm("deaths-on") - storm("deaths-off")
tracer = own("perf") + storm("perf") - storm("deaths-off")
print(f"  own CPU: death watch (on - off) {own('deaths-on') - own('deaths-off'):.1f} ms per 1000 "
      f"children, perf {own('perf'):.1f} ms")
print(f"  storm CPU over --deaths off: death watch {storm('deaths-on') - storm('deaths-off'):+.1f} ms, "
      f"perf {storm('perf') - storm('deaths-off'):+.1f} ms per 1000 children "
      f"(compare with the spread between rounds before reading a difference)")
spread = [float(r[3]) / float(r[1]) * 1e6 for r in rows if r[0] == "deaths-off"]
if len(spread) > 1:
    print(f"  spread of --deaths off's storm CPU between rounds: {max(spread) - min(spread):.1f} ms per 1000")
PY
