#!/usr/bin/env bash
# Core ingestion throughput vs core size, idle and with every CPU busy
# (issue 17: the curve, and item 2's ratio). For each size, a real core
# (bench_bigcore, written by the kernel) is fed on stdin to
#   hook   recorder-coredump as installed (zstd level and workers adapted to
#          the CPU it gets: coredump-hook/core_compression.h),
#   fixed  recorder-coredump --core-level-fixed (level 3, 2 workers always:
#          the hook before the adapting),
#   zstd   zstd -3 -c core > file,
# alternating their order, ROUNDS rounds, the median wall time of each (not
# the best: on a shared host best-of keeps whichever lucky round a contender
# had), page cache warm.
# Each contender reads the core from a pipe (`cat core |`), as the hook does
# under a real core_pattern (the kernel writes the core into a pipe), and the
# hook stores into a store that already exists (copied, untimed, from one
# made by a first run): a host has its store before its second crash.
# "busy" rounds run a fixed background job the same for all three: one shell
# busy loop pinned to each CPU, in a session of its own (like another
# user's work).
# Prints a table, writes DIR/ingest.dat, DIR/ingest.png (gnuplot) and every
# round's times in DIR/ingest_rounds.txt. "CPU-s h/z" is the median CPU time
# (user + sys) of the hook's and zstd's pipelines; "paired" the median over
# rounds of zstd's wall time over the hook's in the same round.
# The core is written through the current core_pattern when it is a plain
# file name (the default "core"); otherwise the pattern is set to a plain
# file for the moment of the crash and restored.
# Usage (root): bench/coredump/bench_ingest.sh [SIZES_MIB] [ROUNDS] [DIR]
#   SIZES_MIB comma-separated, default 32,128,512,4096
source "$(dirname "$0")/../common.sh"
SIZES=${1:-32,128,512,4096}
ROUNDS=${2:-5}
OUT=${3:-bench-out}
mkdir -p "$OUT"
old_pattern=$(cat /proc/sys/kernel/core_pattern)
SPIN=()
bench_cleanup() {
  [ "$(cat /proc/sys/kernel/core_pattern)" = "$old_pattern" ] ||
    echo "$old_pattern" > /proc/sys/kernel/core_pattern
  stop_busy
}
start_busy() {
  local i
  # Each pinned to its CPU: unpinned, the scheduler sometimes put both on
  # one CPU and left the other to whichever contender ran then (its CPU
  # time per second of wall doubled: 0.5 -> 1.1 CPUs), a lottery that
  # decided the busy rows.
  for i in $(seq "$ncpu"); do
    setsid taskset -c $((i - 1)) sh -c 'while :; do :; done' &
    SPIN+=($!)
  done
}
stop_busy() {
  local p
  for p in "${SPIN[@]}"; do kill -- "-$p" 2> /dev/null || kill "$p" 2> /dev/null || true; done
  for p in "${SPIN[@]}"; do wait "$p" 2> /dev/null || true; done
  SPIN=()
}
bench_workdir /var/tmp/flightrec-bench-ingest.XXXXXX
HOOK=$(readlink -f "$B/coredump-hook/recorder-coredump")
BIGCORE=$(readlink -f "$B/bench/coredump/bench_bigcore")

make_core() {  # make_core MIB: prints the core's path
  local dir="$work/c$1" core
  mkdir -p "$dir"
  case "$old_pattern" in
    "|"* | */*) echo "$dir/core" > /proc/sys/kernel/core_pattern ;;
  esac
  (cd "$dir" && ulimit -c unlimited && "$BIGCORE" "$1" > /dev/null) \
    2> /dev/null || true
  [ "$(cat /proc/sys/kernel/core_pattern)" = "$old_pattern" ] ||
    echo "$old_pattern" > /proc/sys/kernel/core_pattern
  core=$(find "$dir" -maxdepth 1 -name 'core*' -type f | head -1)
  [ -n "$core" ] || { echo "no core written in $dir (core_pattern '$old_pattern')" >&2; exit 1; }
  echo "$core"
}

# The hook's store as a host has it: made once by a crash without a core.
"$HOOK" --config /dev/null --store "$work/store0" --socket "$work/nosock" -- \
  "$$" "$$" "$$" 11 "$(date +%s)" -1 0 0 1 bench < /dev/null 2> /dev/null || true
store0_bytes=$(du -b --apparent-size "$work/store0" | tail -1 | cut -f1)

# timed CMD...: runs CMD, appends "wall_s user_s sys_s" to $work/tm (wall
# from bash's microsecond clock: 10 ms steps are 7% of a 64 MiB run).
timed() {
  local t0 t1
  t0=$EPOCHREALTIME
  /usr/bin/time -f "%U %S" -o "$work/us" "$@"
  t1=$EPOCHREALTIME
  echo "$(python3 -c "print(f'{$t1 - $t0:.6f}')") $(tail -1 "$work/us")" > "$work/tm"
}

run_one() {  # run_one WHO MODE CORE: appends "WHO MODE secs user sys stored_bytes" to $work/t
  local who=$1 mode=$2 core=$3 t stored log
  case $who in
    hook | fixed)
      local extra=""
      [ "$who" = fixed ] && extra=--core-level-fixed
      rm -rf "$work/hstore"
      cp -a "$work/store0" "$work/hstore"
      timed sh -c "cat '$core' | '$HOOK' --config /dev/null --store '$work/hstore' \
        --socket '$work/nosock' $extra -- $$ $$ $$ 11 $(date +%s) -1 0 0 1 bench \
        2> '$work/hook.log'"
      t=$(cat "$work/tm")
      stored=$(($(du -b --apparent-size "$work/hstore" | tail -1 | cut -f1) - store0_bytes))
      log=$(grep -o 'zstd level.*' "$work/hook.log" | head -1 | sed 's/; recorderd .*//' | tr ' ' '_')
      echo "$who $mode $t $stored $log" >> "$work/t"
      rm -rf "$work/hstore"
      ;;
    zstd)
      timed sh -c "cat '$core' | zstd -q -3 -c > '$work/core.zst'"
      t=$(cat "$work/tm")
      stored=$(stat -c %s "$work/core.zst")
      echo "zstd $mode $t $stored" >> "$work/t"
      rm -f "$work/core.zst"
      ;;
  esac
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg), zstd $(zstd -V | grep -o 'v[0-9.]*')"
dat="$OUT/ingest.dat"
echo "# MiB hook_idle fixed_idle zstd_idle hook_busy fixed_busy zstd_busy (MB/s)" > "$dat"
echo "# MiB who mode wall_s user_s sys_s stored_bytes [hook's choice]" > "$OUT/ingest_rounds.txt"
printf '%6s %5s | %9s %9s %9s | %10s %10s %7s | %7s %7s | %13s | %s\n' MiB CPUs hook fixed "zstd -3" \
  hook/zstd fixed/zstd paired "hook x" "zstd x" "CPU-s h/z" "hook's choice"
IFS=, read -r -a sizes <<< "$SIZES"
for mib in "${sizes[@]}"; do
  core=$(make_core "$mib")
  bytes=$(stat -c %s "$core")
  cat "$core" > /dev/null
  : > "$work/t"
  for r in $(seq "$ROUNDS"); do
    order=(hook fixed zstd)
    [ $((r % 2)) = 0 ] && order=(zstd fixed hook)
    for who in "${order[@]}"; do run_one "$who" idle "$core"; done
    start_busy
    for who in "${order[@]}"; do run_one "$who" busy "$core"; done
    stop_busy
  done
  sed "s/^/$mib /" "$work/t" >> "$OUT/ingest_rounds.txt"  # every round, for medians
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 - "$bytes" "$mib" "$load" "$work/t" "$dat" << 'PY'
import sys
n, mib, load, path, dat = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
walls, cpu, last = {}, {}, {}
for line in open(path):
    f = line.split()
    who, mode, secs, stored = f[0], f[1], float(f[2]), int(f[5])
    walls.setdefault((who, mode), []).append(secs)
    last[(who, mode)] = (stored, " ".join(f[6:]).replace("_", " "))
    # CPU time (user + sys of the pipeline, cat included for both): what
    # each needs of a contended CPU, far steadier than wall time here.
    cpu.setdefault((who, mode), []).append(float(f[3]) + float(f[4]))
med = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
row = [mib]
for mode in ("idle", "busy"):
    h, x, z = ((med(walls[(w, mode)]),) + last[(w, mode)] for w in ("hook", "fixed", "zstd"))
    mbs = lambda b: n / b[0] / 1e6
    # Round by round (the two ran minutes apart at most, the background
    # the same): the median of zstd's wall over the hook's in each round.
    paired = med([zw / hw for zw, hw in zip(walls[("zstd", mode)], walls[("hook", mode)])])
    print(f"{mib:>6} {mode:>5} | {mbs(h):9.1f} {mbs(x):9.1f} {mbs(z):9.1f} | "
          f"{z[0]/h[0]:9.2f}x {z[0]/x[0]:9.2f}x {paired:6.2f}x | {n/h[1]:7.2f} {n/z[1]:7.2f} | "
          f"{med(cpu[('hook', mode)]):5.2f}/{med(cpu[('zstd', mode)]):5.2f} | {h[2]}  [load {load}]")
    row += [f"{mbs(h):.1f}", f"{mbs(x):.1f}", f"{mbs(z):.1f}"]
open(dat, "a").write(" ".join(row) + "\n")
PY
  rm -rf "$work/c$mib"
done
bench_plot "$OUT/ingest.png" "Core ingestion: recorder-coredump vs zstd -3 ($(nproc) CPUs)" \
  "core size (MiB)" "MB/s (median of $ROUNDS)" "$dat" \
  "2:hook, idle" "3:hook fixed level 3, idle" "4:zstd -3, idle" \
  "5:hook, CPUs busy" "6:hook fixed, CPUs busy" "7:zstd -3, CPUs busy"
