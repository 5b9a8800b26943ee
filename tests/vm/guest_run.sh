#!/bin/bash
# Runs inside the QEMU guest, chrooted into the host root (9p, read-only).
# usage: guest_run.sh MODULE_KO BUILD_DIR scenario...
# Prints FLIGHTREC-VM-RESULT <scenario> PASS|FAIL <detail> per scenario; after
# each one the module is unloaded and then the kernel log is checked for
# splats, which fail the scenario.  After the last one, "final" exercises the
# paths the module hooked and checks the log once more.
KO=$1 BUILD=$2; shift 2
T="$BUILD/tests/vm/fr_vm_test"
LIB="$BUILD/tests/vm/libfr_vm_burn.so"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
SPLAT='BUG|Oops|WARNING|KASAN|lockdep|possible circular locking|general protection|RCU stall|soft lockup|Call Trace'

result() { # name status detail
  local splat st=$2 detail=$3
  # Unload first: what rmmod logs (or breaks) belongs to this scenario.
  if [ -d /sys/module/flightrec ] && ! rmmod flightrec 2>/dev/null; then
    st=FAIL detail="rmmod failed; $detail"
  fi
  splat=$(dmesg | grep -E "$SPLAT" | head -5 | tr '\n' ' ')
  if [ -n "$splat" ]; then
    dmesg | sed 's/^/SPLAT /' | tail -60
    echo "FLIGHTREC-VM-RESULT $1 FAIL kernel splat: $splat"
  else
    echo "FLIGHTREC-VM-RESULT $1 $st $detail"
  fi
  dmesg -C
}

run() { # name cmd...: PASS iff cmd exits 0; its last stdout line is the detail
  local name=$1 out rc; shift
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then result "$name" PASS "$(echo "$out" | tail -1)"
  else result "$name" FAIL "$(echo "$out" | tail -3 | tr '\n' ' ')"; fi
}

meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }

scen_load() {
  insmod "$KO" || { result load FAIL "insmod failed"; return; }
  local out; out=$("$T" record 2>&1) || { result load FAIL "record: $out"; return; }
  rmmod flightrec || { result load FAIL "rmmod failed"; return; }
  # 50 cycles at the default ring sizes with a spinner per CPU, by
  # finit_module/delete_module from one process (exec'ing kmod 100 times
  # under TCG costs minutes); memory checks: see cmd_cycles.
  local cyc rc; cyc=$("$T" cycles "$KO" 50 2>&1); rc=$?
  if [ $rc -eq 0 ]; then result load PASS "$out; $(echo "$cyc" | tail -1)"
  else result load FAIL "$out; $(echo "$cyc" | tail -3 | tr '\n' ' ')"; fi
}

# rmmod while a process holds /dev/flightrec open must be refused, and the
# holder's device keep working; prints a detail line, returns 0 if so.
held_rmmod() {
  local d=/tmp/hold h i
  rm -rf $d; mkdir -p $d; mkfifo $d/fifo
  "$T" hold < $d/fifo > $d/out 2>&1 & h=$!
  exec 3> $d/fifo
  for i in $(seq 300); do grep -q held $d/out && break; sleep 0.1; done
  if ! grep -q held $d/out; then
    exec 3>&-; wait $h; echo "holder did not open the device: $(cat $d/out)"; return 1
  fi
  if rmmod flightrec 2> $d/rmmod.err; then
    exec 3>&-; wait $h; echo "rmmod succeeded while the device was held"; return 1
  fi
  [ -d /sys/module/flightrec ] || { exec 3>&-; wait $h; echo "module gone after a failed rmmod"; return 1; }
  exec 3>&-
  if ! wait $h; then echo "holder failed after the refused rmmod: $(tail -1 $d/out)"; return 1; fi
  echo "rmmod while held refused ($(head -1 $d/rmmod.err)), $(tail -1 $d/out)"
}

scen_abi() {
  insmod "$KO" || { result abi FAIL "insmod failed"; return; }
  local out held
  out=$("$T" abi 100000 2>&1) || { result abi FAIL "$(echo "$out" | tail -3 | tr '\n' ' ')"; return; }
  held=$(held_rmmod) || { result abi FAIL "$held"; return; }
  result abi PASS "$(echo "$out" | tail -1); $held"
}

scen_crash() { insmod "$KO" && run crash "$T" crash; }

scen_hotplug() {
  insmod "$KO" || { result hotplug FAIL "insmod failed"; return; }
  "$T" spin 600000 & local s1=$!
  "$T" spin 600000 & local s2=$!
  local i bad=""
  for i in $(seq 10); do
    echo 0 > /sys/devices/system/cpu/cpu1/online || bad="offline $i failed"
    "$T" spin 100
    echo 1 > /sys/devices/system/cpu/cpu1/online || bad="online $i failed"
    "$T" spin 100
  done
  kill $s1 $s2; wait $s1 $s2 2>/dev/null
  if [ -n "$bad" ]; then result hotplug FAIL "$bad"; return; fi
  run hotplug "$T" check
}

scen_loss() {
  # Tiny rings (8 records, 4 KiB AUX) and a stack copy bigger than the AUX
  # ring: every user-mode sample is dropped for size, kernel ones overwrite.
  insmod "$KO" data_ring_kb=4 aux_ring_kb=4 stack_bytes=8192 || { result loss FAIL "insmod failed"; return; }
  local out fr
  out=$("$T" loss 2>&1) || { result loss FAIL "$(echo "$out" | tail -3 | tr '\n' ' ')"; return; }
  rmmod flightrec || { result loss FAIL "rmmod failed"; return; }
  # FREEZE waits for handlers in flight: long handlers (64 KiB stack copies
  # by spinners on the other CPU), a DATA ring rewritten every 8 ms, 300
  # freezes, each followed at once by ring reads (see cmd_freeze).
  insmod "$KO" data_ring_kb=4 aux_ring_kb=256 stack_bytes=65536 ||
    { result loss FAIL "insmod 2 failed"; return; }
  fr=$("$T" freeze 300 2>&1) || { result loss FAIL "$(echo "$fr" | tail -3 | tr '\n' ' ')"; return; }
  result loss PASS "$(echo "$out" | tail -1); $(echo "$fr" | tail -1)"
}

# A crash storm: 16 processes crash at once against the 2 default marker slots.
scen_storm() { insmod "$KO" && run storm "$T" storm 16; }

scen_sideband() { insmod "$KO" && run sideband "$T" sideband "$LIB"; }

# recorderd --backend module: the recorder's acceptance (spin_a/spin_b 70/30
# in the window; a dlopened, dlclosed library of an exited process) on the
# module's rings, through the same dump and report as the perf backend.
scen_backend() {
  # 16 MiB of DATA ring per CPU: over 30 s at the default rate.
  insmod "$KO" data_ring_kb=16384 || { result backend FAIL "insmod failed"; return; }
  local W=/tmp/backend
  mkdir -p $W
  local R="$BUILD/recorder/cli/recorder --store $W/store --socket $W/sock"
  "$BUILD/recorder/daemon/recorderd" --backend module --store $W/store --socket $W/sock \
    --foreground > $W/d.log 2>&1 &
  local d=$! i
  for i in $(seq 300); do $R status > /dev/null 2>&1 && break; sleep 0.1; done
  "$BUILD/tests/programs/fr_dlopen" "$BUILD/tests/programs/libfr_plugin.so" 0.5 > /dev/null &
  local dp=$!
  wait $dp
  local id1 id2 r1 r2
  id2=$($R dump --last 20s --pid $dp --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  "$BUILD/tests/programs/fr_spin" 2 > /dev/null & local sp=$!
  wait $sp
  id1=$($R dump --last 20s --pid $sp --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  r1=$($R report "$id1" --json 2>&1)
  r2=$($R report "$id2" --json 2>&1)
  kill $d; wait $d 2>/dev/null
  local verdict
  verdict=$(python3 - "$r1" "$r2" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ra, rb = a["rows"], b["rows"]
spin = {r["key"]: r["self_pct"] for r in ra}
ok = (a["samples"] > 100 and ra and ra[0]["key"] == "spin_a" and 55 <= spin.get("spin_a", 0) <= 85
      and 15 <= spin.get("spin_b", 0) <= 45 and rb and rb[0]["key"] == "plugin_burn"
      and "libfr_plugin.so" in rb[0].get("dso", ""))
print(("PASS" if ok else "FAIL") + f" spin: {a['samples']} samples, spin_a {spin.get('spin_a', 0):.1f}%"
      f" spin_b {spin.get('spin_b', 0):.1f}%; dlopen: top {rb[0]['key'] if rb else '-'}"
      f" in {rb[0].get('dso', '') if rb else '-'}"
      + ("" if ok else f"; spin top: {[(r['key'], r.get('dso', '')) for r in ra[:3]]};"
         f" dlopen samples {b['samples']}"))
PY
)
  [ -n "$verdict" ] || verdict="FAIL no report: $(tail -3 $W/d.log | tr '\n' ' ') $r1"
  result backend "${verdict%% *}" "${verdict#* }"
}

scen_bench() {
  # Per-sample cost: slowdown of a fixed loop at 10 kHz per CPU, module vs perf.
  local n=${FR_BENCH_BLOCKS:-3000} base mod perfr
  base=$("$T" bench "$n")
  insmod "$KO" period=100000 stack_bytes=0 || return
  mod=$("$T" bench "$n")
  rmmod flightrec
  insmod "$KO" period=100000 stack_bytes=1024 || return
  local modaux; modaux=$("$T" bench "$n")
  rmmod flightrec
  perfr=$(perf record -q -a -g -e cpu-clock -c 100000 -o /tmp/perf.data -- "$T" bench "$n" 2>/dev/null | tail -1)
  echo "FLIGHTREC-VM-BENCH base_ns=$base module_ns=$mod module_stack1k_ns=$modaux perf_g_ns=$perfr" \
       "module_slowdown=$(awk -v a="$base" -v b="$mod" 'BEGIN{printf "%.3f", b/a}')" \
       "module_stack1k_slowdown=$(awk -v a="$base" -v b="$modaux" 'BEGIN{printf "%.3f", b/a}')" \
       "perf_slowdown=$(awk -v a="$base" -v b="$perfr" 'BEGIN{printf "%.3f", b/a}')"
  # Dump latency of `recorder dump --last 5s`, recorderd on the module vs on
  # perf, with a CPU-bound loop running: the daemon's own took_ms (freeze to
  # committed record) and the command's wall time. The 6 s wait fills the
  # window (a benchmark's pacing, not a test's synchronisation).
  local be W=/tmp/dumplat out=""
  for be in module perf; do
    if [ $be = module ]; then insmod "$KO" data_ring_kb=16384 || return; fi
    rm -rf $W; mkdir -p $W
    local R="$BUILD/recorder/cli/recorder --store $W/store --socket $W/sock"
    "$BUILD/recorder/daemon/recorderd" --backend $be --store $W/store --socket $W/sock \
      --foreground > $W/d.log 2>&1 &
    local d=$! i
    for i in $(seq 300); do $R status > /dev/null 2>&1 && break; sleep 0.1; done
    "$T" spin 100000000 > /dev/null & local sp=$!
    sleep 6
    local t0 t1 took
    t0=$(date +%s%N)
    took=$($R dump --last 5s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["took_ms"])')
    t1=$(date +%s%N)
    kill $sp $d; wait $sp $d 2>/dev/null
    out="$out dump_${be}_took_ms=$took dump_${be}_wall_ms=$(( (t1 - t0) / 1000000 ))"
    if [ $be = module ]; then rmmod flightrec; fi
  done
  echo "FLIGHTREC-VM-BENCH$out"
  result bench PASS "see FLIGHTREC-VM-BENCH"
}

# After the last unload: fork/exec/mmap/exit, a core dump and timer ticks on
# every CPU run through the places the module hooked; a hook or timer left
# behind would oops here.
final_check() {
  [ -d /sys/module/flightrec ] && rmmod flightrec
  local bad=""
  [ -d /sys/module/flightrec ] && bad="flightrec still loaded"
  "$T" crashonly > /dev/null 2>&1 || bad="$bad crash child failed"
  "$T" spin 300 & "$T" spin 300; wait
  if [ -n "$bad" ]; then result final FAIL "$bad"
  else result final PASS "module unloaded; fork/exec/mmap/exit, a core dump, ticks on every CPU: no splat"; fi
}

dmesg -C
for s in "$@"; do
  t=$(cut -d' ' -f1 /proc/uptime)
  "scen_$s"
  echo "FLIGHTREC-VM-INFO $s took $(awk -v a="$t" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{print b-a}') s"
done
final_check
