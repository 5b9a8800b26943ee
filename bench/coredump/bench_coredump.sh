#!/usr/bin/env bash
# Coredump hook benchmarks, side by side in one run (root needed):
#   1. ingestion: recorder-coredump reading a real core of SIZE MiB from stdin
#      (store, metadata, backtrace: everything it does for a crash) vs
#      `zstd -3 -c core > file`, alternating, ROUNDS rounds, best of each;
#   2. crash → listed: from starting a program that crashes at once to
#      `recorder crash list` showing it, with recorderd running (history
#      attached) and without it.
# The kernel's core_pattern is restored on exit.
# Usage: bench/coredump/bench_coredump.sh [SIZE_MIB] [ROUNDS]
source "$(dirname "$0")/../common.sh"
SIZE=${1:-2048}
ROUNDS=${2:-2}
old_pattern=$(cat /proc/sys/kernel/core_pattern)
old_limit=$(cat /proc/sys/kernel/core_pipe_limit)
bench_cleanup() {
  echo "$old_pattern" > /proc/sys/kernel/core_pattern
  echo "$old_limit" > /proc/sys/kernel/core_pipe_limit
  [ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null || true
  [ -n "${SLEEPER:-}" ] && kill "$SLEEPER" 2>/dev/null || true
}
bench_workdir /var/tmp/flightrec-bench-core.XXXXXX
HOOK=$(readlink -f "$B/coredump-hook/recorder-coredump")
R="$B/recorder/cli/recorder --store $work/store --socket $work/sock"

echo "== making a real ${SIZE} MiB core (plain-file core_pattern)"
echo "$work/core.%p" > /proc/sys/kernel/core_pattern
( ulimit -c unlimited; "$B/bench/coredump/bench_bigcore" "$SIZE" > /dev/null ) 2>/dev/null || true
core=$(ls "$work"/core.* | head -1)
bytes=$(stat -c %s "$core")
echo "core: $bytes bytes"
sleep 600 & SLEEPER=$!

: > "$work/hook.t"; : > "$work/zstd.t"
for r in $(seq "$ROUNDS"); do
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  cat "$core" > /dev/null  # both sides read from the page cache
  /usr/bin/time -f "%e %M" -a -o "$work/hook.t" "$HOOK" --config /dev/null --store "$work/hstore$r" \
    --socket "$work/nosock" -- "$SLEEPER" "$SLEEPER" "$SLEEPER" 11 "$(date +%s)" -1 0 0 1 bench \
    < "$core" 2>/dev/null
  /usr/bin/time -f "%e %M" -a -o "$work/zstd.t" sh -c "zstd -q -3 -c '$core' > '$work/core.zst'"
  rm -rf "$work/hstore$r" "$work/core.zst"
done
python3 - "$bytes" "$work/hook.t" "$work/zstd.t" <<'PY'
import sys
n = int(sys.argv[1])
def best(path):
    rows = [l.split() for l in open(path) if l.strip() and l.split()[0][0].isdigit()]
    t = min(float(r[0]) for r in rows); m = max(int(r[1]) for r in rows)
    return t, m
ht, hm = best(sys.argv[2]); zt, zm = best(sys.argv[3])
print(f"recorder-coredump: {n/ht/1e6:8.1f} MB/s ({ht:.2f} s), peak RSS {hm/1024:.0f} MiB")
print(f"zstd -3 -c:        {n/zt/1e6:8.1f} MB/s ({zt:.2f} s), peak RSS {zm/1024:.0f} MiB")
print(f"ratio (hook / zstd): {zt/ht:.2f}x   (goal >= 0.9x)")
PY

echo "== crash -> listed"
"$B/recorder/daemon/recorderd" --store "$work/store" --socket "$work/sock" > "$work/d.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do $R status > /dev/null 2>&1 && break; sleep 0.05; done
$R coredump install --hook "$HOOK" > /dev/null
listed_ms() {  # prints ms from start to listed for one crash
  local t0 pid
  t0=$(date +%s%N)
  pid=$(sh -c "ulimit -c unlimited; exec $B/tests/programs/fr_crash segv 0" 2>/dev/null | head -1) || true
  for _ in $(seq 2000); do
    if $R crash list --pid "$pid" --json 2>/dev/null | grep -q '"pid"'; then break; fi
    sleep 0.005
  done
  echo $(( ($(date +%s%N) - t0) / 1000000 ))
}
with=$(for i in 1 2 3 4 5; do listed_ms; done | median)
kill "$DPID"; wait "$DPID" 2>/dev/null || true; DPID=
without=$(for i in 1 2 3 4 5; do listed_ms; done | median)
$R coredump uninstall > /dev/null
echo "crash -> listed, median of 5: ${with} ms with history (recorderd up), ${without} ms without (recorderd down)"
