# Scenario "panic" (issue 15), sourced by guest_run.sh; always runs last.
#
# run_vm_tests.sh boots every guest with memmap=4M$0x30000000 (the panic
# region), memmap=4K$0x30400000 (the boot marker, see the /init there) and
# panic=1, in a QEMU that resets instead of exiting on a reboot.  Boot 1 runs
# the other scenarios, then scen_panic: an unusable range is refused, the
# region is found EMPTY (cold boot) and armed, a workload spins in
# fr_vm_burn pinned to cpu 1, and cpu 0 panics the kernel with sysrq-c.  The
# guest resets in the same QEMU (RAM kept); /init sees the marker it left and
# runs boot 2 (FR_VM_BOOT=2): scen_panic_boot2 checks what the region held
# and the state machine, then final_check.  The host compares the boot id
# boot 1 printed with the one the region names.
PANIC_ADDR=0x30000000
PANIC_SIZE=0x400000
PANIC_MARK=0x30400000
# 10 ms: under TCG on a loaded host a vCPU may not run for a few ms, and the
# check is "the last sample within 2 periods of the panic".
PANIC_ARGS="panic_addr=$PANIC_ADDR panic_size=$PANIC_SIZE period=10000000"

# dmesg must contain $1 (a fixed string); prints what it found.
dmesg_has() { dmesg | grep -F -- "$1" | tail -1 | grep . ; }

scen_panic() {
  local out b pid i t0
  t0=$(cut -d' ' -f1 /proc/uptime)
  [ -n "$FR_VM_TOKEN" ] || { result panic FAIL "no boot marker token (run_vm_tests.sh sets fr.token)"; return; }
  # A range the allocators own is refused, and the module still loads.
  insmod "$KO" panic_addr=0x1000000 panic_size=$PANIC_SIZE || { result panic FAIL "insmod (RAM range) failed"; return; }
  out=$("$T" panic-info --expect unavailable --error -16 2>&1) || { result panic FAIL "RAM range: $out"; return; }
  dmesg_has "intersects System RAM" > /dev/null || { result panic FAIL "no log line for the RAM range"; return; }
  rmmod flightrec
  # Cold boot: nothing there, armed for this boot.
  insmod "$KO" $PANIC_ARGS || { result panic FAIL "insmod failed"; return; }
  out=$("$T" panic-info --expect empty 2>&1) || { result panic FAIL "cold boot: $out"; return; }
  dmesg_has "(cold boot or never armed)" || { result panic FAIL "no cold-boot log line"; return; }
  # The workload: fr_vm_burn on cpu 1, until it has run 1.5 s of CPU time
  # (utime in 100 Hz ticks; bounded wait on the condition).
  "$T" panic-burn "$LIB" 1 > /tmp/burn.out 2>&1 &
  pid=$!
  for i in $(seq 600); do
    b=$(awk '{ print $14 }' /proc/$pid/stat 2>/dev/null || echo 0)
    [ "${b:-0}" -ge 150 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  [ "${b:-0}" -ge 150 ] || { kill $pid; result panic FAIL "workload did not run: $(cat /tmp/burn.out)"; return; }
  echo "FLIGHTREC-VM-PANIC-BOOT1 $(cat /proc/sys/kernel/random/boot_id)"
  # The marker tells the next boot's /init this reset was the expected one.
  busybox devmem $((PANIC_MARK + 8)) 32 "$FR_VM_TOKEN"
  echo "FLIGHTREC-VM-PANIC-NOW boot 1 part took $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN{print b-a}') s"
  taskset -c 0 sh -c 'echo c > /proc/sysrq-trigger'
  busybox devmem $((PANIC_MARK + 8)) 32 0
  kill $pid
  result panic FAIL "sysrq-trigger c returned"
}

# The panic record, then a second panic without release, another release's
# region, PANIC_RELEASE, a corrupted header.
scen_panic_boot2() {
  local out chk rc p=/tmp/panic
  mkdir -p $p
  insmod "$KO" $PANIC_ARGS test_panic=1 || { result panic FAIL "boot 2: insmod failed"; return; }
  out=$("$T" panic-info --expect held 2>&1) || { result panic FAIL "boot 2: $out"; return; }
  dmesg_has "held: a panic of boot" > /dev/null || { result panic FAIL "no held log line"; return; }
  out=$("$T" panic-dump $p/1.bin 2>&1) || { result panic FAIL "dump: $out"; return; }
  chk=$("$T" panic-check $p/1.bin --panic-cpu 0 --sysrq --workload-cpu 1 --lib "$LIB" --panics-lost 0 2>&1)
  echo "$chk" | grep '^{' | sed 's/^/FLIGHTREC-VM-PANIC-CHECK /'
  echo "$chk" | tail -1 | grep -q "^panic region valid" || { result panic FAIL "check: $(echo "$chk" | tail -1)"; return; }
  grep -q "\"boot_id\":\"$(cat /proc/sys/kernel/random/boot_id)\"" <<< "$chk" &&
    { result panic FAIL "the region names this boot, not the crashed one"; return; }
  # A second panic before the first was claimed: counted, the first kept.
  echo 1 > /sys/module/flightrec/parameters/panic_test_capture || { result panic FAIL "test capture refused"; return; }
  out=$("$T" panic-info --expect held 2>&1) || { result panic FAIL "after a 2nd panic: $out"; return; }
  "$T" panic-dump $p/2.bin > /dev/null 2>&1 || { result panic FAIL "dump 2 failed"; return; }
  out=$("$T" panic-check $p/2.bin --panics-lost 1 2>&1) || { result panic FAIL "2nd panic: $(echo "$out" | tail -1)"; return; }
  cmp -i 4096 $p/1.bin $p/2.bin > /dev/null ||
    { result panic FAIL "a 2nd panic changed the held history"; return; }
  # Another kernel release's region: held as is (user space leaves its kernel frames unresolved).
  rmmod flightrec
  out=$("$T" panic-corrupt $PANIC_ADDR release 2>&1) || { result panic FAIL "corrupt release: $out"; return; }
  insmod "$KO" $PANIC_ARGS || { result panic FAIL "insmod 3 failed"; return; }
  out=$("$T" panic-info --expect held 2>&1) || { result panic FAIL "other release: $out"; return; }
  "$T" panic-dump $p/3.bin > /dev/null 2>&1 || { result panic FAIL "dump 3 failed"; return; }
  out=$("$T" panic-check $p/3.bin --release-other --panics-lost 1 2>&1) ||
    { result panic FAIL "other release: $(echo "$out" | tail -1)"; return; }
  # Claimed: released and armed for this boot; a reload finds it armed, no panic.
  out=$("$T" panic-release 2>&1) || { result panic FAIL "release: $out"; return; }
  out=$("$T" panic-info --expect empty 2>&1) || { result panic FAIL "after release: $out"; return; }
  rmmod flightrec
  insmod "$KO" $PANIC_ARGS || { result panic FAIL "insmod 4 failed"; return; }
  out=$("$T" panic-info --expect empty 2>&1) || { result panic FAIL "reload after release: $out"; return; }
  dmesg_has "no panic; armed for this boot" > /dev/null || { result panic FAIL "no armed-by log line"; return; }
  # A corrupted header: refused with a clear log line, then armed.
  rmmod flightrec
  out=$("$T" panic-corrupt $PANIC_ADDR flip 2>&1) || { result panic FAIL "corrupt flip: $out"; return; }
  insmod "$KO" $PANIC_ARGS || { result panic FAIL "insmod 5 failed"; return; }
  out=$("$T" panic-info --expect refused --error -74 2>&1) || { result panic FAIL "corrupted: $out"; return; }
  local line
  line=$(dmesg_has "refused: header checksum mismatch") || { result panic FAIL "no refused log line"; return; }
  # A region smaller than the rings (64 KiB: 8 KiB of records per CPU) and
  # another size than the header says (refused: inconsistent sizes), then a
  # capture of the live rings, frozen: each CPU keeps its newest chunks, CUT,
  # the older records counted in not_copied, the counters still exact.
  rmmod flightrec
  insmod "$KO" panic_addr=$PANIC_ADDR panic_size=0x10000 test_panic=1 ||
    { result panic FAIL "insmod 6 failed"; return; }
  out=$("$T" panic-info --expect refused --error -22 2>&1) || { result panic FAIL "other size: $out"; return; }
  "$T" spin 1000 & "$T" spin 1000; wait
  out=$("$T" panic-capture $p/4.bin 2>&1) || { result panic FAIL "capture: $out"; return; }
  out=$("$T" panic-check $p/4.bin --live --cut 2>&1); rc=$?
  echo "$out" | grep '^{' | sed 's/^/FLIGHTREC-VM-PANIC-CUT /'
  [ $rc -eq 0 ] || { result panic FAIL "cut: $(echo "$out" | tail -1)"; return; }
  result panic PASS "$(echo "$chk" | tail -1); 2nd panic counted (panics_lost 1); other release held; released; corrupted header refused: ${line#*] }; 64 KiB region: cut, counters exact"
}
