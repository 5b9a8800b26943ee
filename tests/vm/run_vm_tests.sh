#!/bin/bash
# Boots one of Debian 12's kernels (6.1 or 6.12, generic or PREEMPT_RT), or
# the debug kernel scripts/build_debug_kernel.sh caches, in QEMU (TCG), loads flightrec.ko and runs the guest scenarios, one boot for
# all of them.  Each scenario prints
#   FLIGHTREC-VM-RESULT <name> PASS|FAIL <detail>
# on the serial console, and after the last one the guest prints the result
# of "final" (a kernel-log check after the module's last unload); this script
# parses them and fails if any scenario or final failed, is missing, or the
# guest hung (qemu killed after $FR_VM_TIMEOUT s).
#
# usage: run_vm_tests.sh --build-dir DIR [--flavour generic|rt|debug] [--series 6.1|6.12]
#                        [--guest-script PATH] [scenario...]
#   scenarios: load abi crash hotplug hotfail loss storm sideband backend coredump unwind compat nmi
#              dkms threads uidloop nohook freeze2 sblost sbrename poll throttle markpad memcap overflow hookcap iouring panic (default: all
#              of these; panic always runs last: it panics the guest, which boots a second time),
#   and the benchmarks cost (crash hook cost figures), hcost, bench (bench/vm/run_vm_bench.sh),
#   hcostci (one short hcost round; ctest runs it on the generic kernel)
# FR_VM_SMP: guest vCPUs (default 2), e.g. FR_VM_SMP=8 ... cost for the
# crash hook's cost on 8 CPUs.
set -euo pipefail

# Which Debian kernel to boot: the newest of the flavour (generic:
# linux-image-amd64 or linux-image-6.12-amd64, e.g. 6.1.0-56-amd64 or
# 6.12.117+deb12-amd64; rt: their -rt- builds) in the series (--series 6.1
# or 6.12; default: the newest installed) with both an image in /boot and a
# build tree.  A missing flavour or series fails the run, loudly: CI must run
# each one it names (scripts/setup.sh --vm installs them).  FR_KVER overrides.
FLAVOUR=generic
SERIES=""
for ((i = 1; i <= $#; i++)); do
  j=$((i + 1))
  [ "${!i}" = --flavour ] && FLAVOUR=${!j}
  [ "${!i}" = --series ] && SERIES=${!j}
done
pick_kernel() { # flavour series -> version, or nothing
  local img v
  for img in $(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V -r); do
    v=${img#/boot/vmlinuz-}
    case "$1:$v" in
      generic:*-rt-amd64 | generic:*-cloud-amd64) continue ;;
      generic:*) ;;
      rt:*-rt-amd64) ;;
      *) continue ;;
    esac
    case "$v" in "$2".*) ;; *) continue ;; esac
    [ -d "/lib/modules/$v/build" ] && { echo "$v"; return; }
  done
}
case "$FLAVOUR" in generic | rt | debug) ;; *) echo "run_vm_tests: unknown flavour '$FLAVOUR'" >&2; exit 2 ;; esac
case "$SERIES" in 6.1 | 6.12 | "") ;; *) echo "run_vm_tests: unknown series '$SERIES'" >&2; exit 2 ;; esac
# --flavour debug: the PREEMPT_RT kernel with lockdep, DEBUG_ATOMIC_SLEEP and
# KASAN that scripts/build_debug_kernel.sh builds and caches (its image and
# build tree); any splat on the guest's console fails the run.  Not cached:
# exit 77 (ctest: skipped), saying so.
if [ "$FLAVOUR" = debug ]; then
  SRC0=$(cd "$(dirname "$0")/../.." && pwd)
  DK=$("$SRC0/scripts/build_debug_kernel.sh" --print-dir) || {
    echo "run_vm_tests: debug kernel not cached ($DK); build it with" \
         "scripts/build_debug_kernel.sh (~60 min on 2 busy cores), or scripts/setup.sh --vm --debug-kernel"
    exit 77
  }
  KVER=$(cat "$DK/kernelrelease") KIMG=$DK/bzImage KBUILD=$DK/linux
fi
KVER=${KVER:-${FR_KVER:-$(pick_kernel "$FLAVOUR" "${SERIES:-6}")}}
KIMG=${KIMG:-/boot/vmlinuz-$KVER} KBUILD=${KBUILD:-/lib/modules/$KVER/build}
[ -n "$KVER" ] || {
  echo "run_vm_tests: no $FLAVOUR ${SERIES:-Debian} kernel with headers (/boot/vmlinuz-* and" \
       "/lib/modules/*/build); run scripts/setup.sh --vm" >&2
  exit 1
}
echo "run_vm_tests: $FLAVOUR kernel $KVER"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=""
GUEST_SCRIPT="$SRC/tests/vm/guest_run.sh"
TIMEOUT=${FR_VM_TIMEOUT:-1140}
SCEN=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --guest-script) GUEST_SCRIPT=$2; shift 2 ;;
    --flavour | --series) shift 2 ;;
    *) SCEN+=("$1"); shift ;;
  esac
done
[ -n "$BUILD" ] || { echo "usage: $0 --build-dir DIR [scenario...]" >&2; exit 2; }
[ ${#SCEN[@]} -gt 0 ] || SCEN=(load abi crash hotplug hotfail loss storm sideband backend coredump unwind compat nmi dkms
                               threads uidloop nohook freeze2 sblost sbrename poll throttle markpad memcap overflow hookcap iouring panic)
SMP=${FR_VM_SMP:-2}

# The work dir lives in the build tree: the guest sees the host root
# read-only over 9p, and /tmp is replaced by a guest tmpfs.
WORK=$(mktemp -d "$BUILD/vm-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

t0=$(date +%s.%N)
# Out-of-tree module build from a copy: the source tree stays clean.  W=1:
# the kernel's extra warnings; any warning fails the run.  The test build:
# with the test entry points (tests/vm/fr_test_hooks.c, FR_TEST_HOOKS=y).
mkdir -p "$WORK/mod"
cp "$SRC"/module/Kbuild "$SRC"/module/VERSION "$SRC"/module/*.c "$SRC"/module/*.h "$WORK/mod/"
cp -r "$SRC"/module/uapi "$WORK/mod/"
cp "$SRC/tests/vm/fr_test_hooks.c" "$WORK/mod/"
make -s -C "$KBUILD" M="$WORK/mod" FR_TEST_HOOKS=y W=1 modules > "$WORK/build.log" 2>&1 || {
  cat "$WORK/build.log"; echo "module build failed"; exit 1; }
if grep -i "warning" "$WORK/build.log" | grep -v "Skipping BTF"; then
  echo "module build has warnings"; exit 1
fi
# The NMI torture driver (test only, scenario nmi) against that build's symbols.
mkdir -p "$WORK/nmi"
cp "$SRC/tests/vm/fr_nmi_torture.c" "$WORK/nmi/"
echo 'obj-m += fr_nmi_torture.o' > "$WORK/nmi/Kbuild"
make -s -C "$KBUILD" M="$WORK/nmi" KBUILD_EXTRA_SYMBOLS="$WORK/mod/Module.symvers" \
  W=1 modules > "$WORK/nmi/build.log" 2>&1 || { cat "$WORK/nmi/build.log"; echo "torture build failed"; exit 1; }
if grep -i "warning" "$WORK/nmi/build.log" | grep -v "Skipping BTF"; then
  echo "torture module build has warnings"; exit 1
fi
# Scenario dkms: the module as DKMS builds it for this kernel (dkms.conf, the
# version from module/VERSION), in trees of its own under $WORK; the guest
# loads that very .ko.
tdk0=$(date +%s.%N)
if printf '%s\n' "${SCEN[@]}" | grep -qx dkms; then
  VER=$(cat "$SRC/module/VERSION")
  mkdir -p "$WORK/dkms-src" "$WORK/dkms-tree" "$WORK/dkms"
  cp -r "$SRC/module" "$WORK/dkms-src/flightrec-$VER"
  dkms --dkmstree "$WORK/dkms-tree" --sourcetree "$WORK/dkms-src" build -m flightrec -v "$VER" \
    -k "$KVER" > "$WORK/dkms/build.log" 2>&1 || { cat "$WORK/dkms/build.log"; echo "dkms build failed"; exit 1; }
  # DKMS compresses the .ko as the kernel's own modules are (6.12:
  # CONFIG_MODULE_COMPRESS_XZ, flightrec.ko.xz); busybox insmod wants it plain.
  dk="$WORK/dkms-tree/flightrec/$VER/$KVER/x86_64/module/flightrec.ko"
  if [ -f "$dk" ]; then cp "$dk" "$WORK/dkms/flightrec.ko"
  elif [ -f "$dk.xz" ]; then xz -dc "$dk.xz" > "$WORK/dkms/flightrec.ko"
  elif [ -f "$dk.zst" ]; then zstd -qdc "$dk.zst" > "$WORK/dkms/flightrec.ko"
  else cat "$WORK/dkms/build.log"; echo "dkms built no flightrec.ko"; exit 1
  fi
  [ "$(modinfo -F version "$WORK/dkms/flightrec.ko")" = "$VER" ] ||
    { echo "dkms module version $(modinfo -F version "$WORK/dkms/flightrec.ko") != $VER"; exit 1; }
fi
tdk1=$(date +%s.%N)
# The uapi header's and the module's kernel-doc comments (the script ships
# with the headers, in linux-kbuild).
perl "$KBUILD/scripts/kernel-doc" -none -Werror \
  "$SRC"/module/uapi/*.h "$SRC"/module/*.c "$SRC"/module/*.h "$SRC"/tests/vm/fr_{nmi_torture,test_hooks}.c ||
  { echo "kernel-doc warnings"; exit 1; }
t1=$(date +%s.%N)

# initramfs: busybox + the 9p/virtio modules + /init.
IR="$WORK/initramfs"
mkdir -p "$IR"/{bin,proc,sys,dev,host,mods}
cp /bin/busybox "$IR/bin/busybox"
# 6.12 has the virtio ones built in, fscache inside netfs, and 9pnet needing
# netfs: /init loads what this kernel has as modules, in this order
# (mods/list).
: > "$IR/mods/list"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
         netfs fscache 9pnet 9pnet_virtio 9p; do
  f=$(modinfo -k "$KVER" -n "$m" 2>/dev/null) || f=""
  case "$f" in /*) echo "$m" >> "$IR/mods/list" ;; *) continue ;; esac
  case "$f" in
    *.xz) xz -dc "$f" > "$IR/mods/$m.ko" ;;
    *.zst) zstd -qdc "$f" > "$IR/mods/$m.ko" ;;
    *) cp "$f" "$IR/mods/$m.ko" ;;
  esac
done
cat > "$IR/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mods/list); do
  insmod /mods/$m.ko || echo "insmod $m failed"
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /host || echo "FLIGHTREC-VM-RESULT boot FAIL 9p mount"
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
for w in $(cat /proc/cmdline); do
  case "$w" in
    fr.script=*) S=${w#fr.script=} ;; fr.args=*) A=${w#fr.args=} ;; fr.keep=*) K=${w#fr.keep=} ;;
  esac
done
# The guest gets a writable /tmp of its own; a project checked out under the
# host's /tmp (CI clones can be) is bound back into it so its files stay visible.
mkdir -p /orig
mount -o bind /host/tmp /orig
mount -t tmpfs tmp /host/tmp
for k in $(echo "$K" | tr ',' ' '); do
  mkdir -p "/host/tmp/$k"
  mount -o bind "/orig/$k" "/host/tmp/$k"
done
# Boot marker (scenario panic): every boot is reserved a page at 0x30400000
# (memmap= on the command line) that survives a reset of this QEMU process.
# Word 0 holds this run's token (fr.token=), word 1 the boot count, word 2
# the token again once the panic scenario is about to panic.  A fresh QEMU's
# RAM is zero, so a first boot never sees the token; a later boot is the
# expected panic reset (boot 2 with word 2 set: FR_VM_BOOT=2) or a failure
# (a watchdog panic of some scenario, which -no-reboot used to turn into an
# exit): reported and powered off at once.
M=0x30400000 N=1
for w in $(cat /proc/cmdline); do case "$w" in fr.token=*) FR_VM_TOKEN=${w#fr.token=} ;; esac; done
if [ -n "$FR_VM_TOKEN" ]; then
  if [ $(($(devmem $M 32))) -eq $((FR_VM_TOKEN)) ]; then
    N=$(($(devmem $((M + 4)) 32) + 1))
  else
    devmem $M 32 "$FR_VM_TOKEN"; devmem $((M + 8)) 32 0
  fi
  devmem $((M + 4)) 32 $N
  if [ $N -gt 1 ]; then
    if [ $N -eq 2 ] && [ $(($(devmem $((M + 8)) 32))) -eq $((FR_VM_TOKEN)) ]; then
      export FR_VM_BOOT=2
    else
      echo "FLIGHTREC-VM-RESULT reboot FAIL unexpected reset: boot $N of this QEMU (a panic outside scenario panic)"
      echo FLIGHTREC-VM-DONE; poweroff -f
    fi
  fi
  export FR_VM_TOKEN
fi
echo "FLIGHTREC-VM-BOOTED $(cut -d' ' -f1 /proc/uptime) boot $N"
# PID 1 itself moves into the host root (exec chroot, as switch_root does):
# the kernel's user-mode helpers, such as a core_pattern pipe handler, share
# PID 1's root, so they see the same files as the scenarios.
exec chroot /host /bin/sh -c '/bin/bash "$@"; echo FLIGHTREC-VM-DONE; /bin/busybox poweroff -f' \
  sh "$S" $(echo "$A" | tr ',' ' ')
INIT
chmod +x "$IR/init"
(cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"

# The benchmarks' settings (FR_BENCH_ROUNDS, FR_BENCH_BLOCKS): the guest's
# environment is not ours, so they go in a file next to the module, which
# guest_run.sh sources.
for v in FR_BENCH_ROUNDS FR_BENCH_BLOCKS; do
  [ -n "${!v:-}" ] && printf '%s=%q\n' "$v" "${!v}"
done > "$WORK/bench.env"
ARGS="$WORK/mod/flightrec.ko,$BUILD,$(IFS=,; echo "${SCEN[*]}")"
# Top-level /tmp entries the guest must still see (see /init above).
KEEP=$(for p in "$SRC" "$BUILD" "$GUEST_SCRIPT"; do
  case "$p" in /tmp/*) p=${p#/tmp/}; echo "${p%%/*}" ;; esac
done | sort -u | paste -sd, -)
LOG="$WORK/console.log"
# A hang or a warning ends the guest at once instead of at the timeout: soft
# lockups and RCU stalls panic, and so does any WARN; panic=1 resets the
# guest, whose /init then reports the unexpected reset and powers off.  (The
# hard-lockup detector needs a PMU the TCG guest lacks; a CPU stuck with
# interrupts off still stalls RCU on the others.)  No -no-reboot: scenario
# panic's reset must boot again in this QEMU process, guest RAM kept.
# The thresholds are syzkaller's x86-64 ones (RCU stall 100 s, watchdog_thresh
# 55: soft lockup at 2 x 55 s; its configs for emulated machines go to 300 s
# and 165), not the kernel's 21 s and 10. A TCG guest's clock is the host's:
# when QEMU's vCPU thread does not run for a while, the guest sees that time
# pass at once. CI once saw a 21 s RCU "stall" in a plain bash page fault, in
# a boot where flightrec.ko was never loaded ("Not tainted"). A real lockup
# never ends, so it still panics, later.
WATCHDOG="softlockup_panic=1 panic_on_warn=1 sysctl.kernel.panic_on_rcu_stall=1"
WATCHDOG="$WATCHDOG rcupdate.rcu_cpu_stall_timeout=100 watchdog_thresh=55"
# The debug kernel's reports go to the console at KERN_WARNING (lockdep's
# among them), which loglevel=4 would hide.
LOGLEVEL=4
[ "$FLAVOUR" = debug ] && LOGLEVEL=5
# The panic region and the boot marker page (scenario panic), on every boot:
# e820-reserved, so this 1 GiB guest's allocators never touch them.
RESERVE='memmap=4M$0x30000000 memmap=4K$0x30400000'
# A panic must come back as boot 2 within this bound, or the run fails now.
PANIC_REBOOT_TIMEOUT=${FR_VM_PANIC_REBOOT_TIMEOUT:-240}
# boot_guest ARGS LOG: one QEMU process running the scenarios ARGS names, to
# its power-off or the timeout. Sets rc and panic_hung; leaves LOG.txt.
boot_guest() {
  local args=$1 log=$2 token qpid tp=""
  token=$(( (RANDOM << 15 | RANDOM) + 1 ))
  panic_hung=""
  set +e
  timeout -k 5 "$TIMEOUT" qemu-system-x86_64 -accel tcg -smp "$SMP" -m 1024 -nographic \
    -kernel "$KIMG" -initrd "$WORK/initramfs.gz" \
    -append "console=ttyS0 panic=1 $WATCHDOG $RESERVE quiet loglevel=$LOGLEVEL fr.token=$token fr.script=$GUEST_SCRIPT fr.args=$args fr.keep=$KEEP" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -nic none > "$log" 2>&1 < /dev/null &
  qpid=$!
  # Bounded wait for the reset: once the guest announced its panic, the
  # second boot's banner must follow within PANIC_REBOOT_TIMEOUT s (a hung
  # panic notifier would otherwise hold the run until the global timeout).
  while kill -0 $qpid 2>/dev/null; do
    if [ -z "$tp" ] && grep -q FLIGHTREC-VM-PANIC-NOW "$log"; then tp=$(date +%s); fi
    if [ -n "$tp" ] && ! grep -q "FLIGHTREC-VM-BOOTED .* boot 2" "$log" &&
       [ $(( $(date +%s) - tp )) -gt "$PANIC_REBOOT_TIMEOUT" ]; then
      panic_hung=1; kill $qpid; break
    fi
    sleep 1
  done
  wait $qpid
  rc=$?
  set -e
  tr -d '\r' < "$log" > "$log.txt"
}
# Did scenario panic's second boot fail before flightrec.ko was in it? Its
# kernel never reached /init, or it panicked untainted (no out-of-tree module
# loaded in that boot: "Not tainted"). CI saw both, rarely, on a TCG guest
# after its reset (an RCU stall in a bash page fault; no banner in 240 s).
# Boot 1's module only leaves the reserved panic region behind.
boot2_failed_untainted() {
  local after
  # (Not anchored: the banner after a reset follows SeaBIOS's escapes.)
  [ -n "$panic_hung" ] && return 0
  grep -q "FLIGHTREC-VM-RESULT reboot FAIL" "$LOG.txt" || return 1
  after=$(sed -n '/FLIGHTREC-VM-BOOTED .* boot 2/,$p' "$LOG.txt")
  echo "$after" | grep -q "Kernel panic - not syncing" &&
    echo "$after" | grep -q "CPU: .* Not tainted" && ! echo "$after" | grep -q "CPU: .* Tainted:"
}
t2=$(date +%s.%N)
boot_guest "$ARGS" "$LOG"
# Then scenario panic runs again, alone, in a fresh QEMU: once, saying so;
# a second failure fails the run. Any other failure never gets a second run.
if printf '%s\n' "${SCEN[@]}" | grep -qx panic && boot2_failed_untainted; then
  echo "FLIGHTREC-VM-INFO panic: boot 2 failed with flightrec.ko not loaded in it; panic rerun alone in a fresh QEMU. First run's console tail:"
  tail -40 "$LOG.txt" | sed 's/^/  first run: /'
  sed 's/FLIGHTREC-VM-RESULT reboot FAIL/FLIGHTREC-VM-INFO first run: reboot failed/' "$LOG.txt" > "$LOG.first.txt"
  boot_guest "$WORK/mod/flightrec.ko,$BUILD,panic" "$LOG"
  cat "$LOG.first.txt" "$LOG.txt" > "$LOG.both.txt" && mv "$LOG.both.txt" "$LOG.txt"
fi
t3=$(date +%s.%N)
[ -n "${FR_VM_LOG:-}" ] && cp "$LOG.txt" "$FR_VM_LOG"
fail=0
if [ $rc -ne 0 ] || ! grep -q FLIGHTREC-VM-DONE "$LOG.txt"; then
  echo "=== guest did not finish (qemu rc $rc); console log:"
  cat "$LOG.txt"
  fail=1
fi
if [ -n "$panic_hung" ]; then
  echo "FLIGHTREC-VM-RESULT panic FAIL no second boot within ${PANIC_REBOOT_TIMEOUT}s of the panic"; fail=1
fi
if grep "FLIGHTREC-VM-RESULT reboot FAIL" "$LOG.txt"; then fail=1; fi
# Scenario panic, host side: the region boot 2 found names boot 1.
if printf '%s\n' "${SCEN[@]}" | grep -qx panic; then
  b1=$(sed -n 's/^FLIGHTREC-VM-PANIC-BOOT1 //p' "$LOG.txt" | tail -1)
  b2=$(sed -n 's/^FLIGHTREC-VM-PANIC-CHECK .*"boot_id":"\([0-9a-f-]*\)".*/\1/p' "$LOG.txt" | tail -1)
  if [ -z "$b1" ] || [ "$b1" != "$b2" ]; then
    echo "FLIGHTREC-VM-RESULT panic-bootid FAIL boot 1 was '$b1', the region names '$b2'"; fail=1
  else
    echo "FLIGHTREC-VM-RESULT panic-bootid PASS the held region names boot 1 ($b1)"
  fi
  # ... and so does the record of kind panic recorderd stored from it
  # (generic kernel only: guest_panic.sh's PANIC_RD).
  b3=$(sed -n 's/^FLIGHTREC-VM-PANIC-RECORD .*"boot_id": *"\([0-9a-f-]*\)".*/\1/p' "$LOG.txt" | tail -1)
  if [ "$FLAVOUR" = rt ]; then
    :
  elif [ -z "$b1" ] || [ "$b1" != "$b3" ]; then
    echo "FLIGHTREC-VM-RESULT panic-record-bootid FAIL boot 1 was '$b1', the panic record names '$b3'"; fail=1
  else
    echo "FLIGHTREC-VM-RESULT panic-record-bootid PASS the panic record names boot 1 ($b1)"
  fi
fi
for s in "${SCEN[@]}" final; do
  line=$(grep "^FLIGHTREC-VM-RESULT $s " "$LOG.txt" | tail -1 || true)
  if [ -z "$line" ]; then
    echo "FLIGHTREC-VM-RESULT $s FAIL no result"; fail=1
  else
    echo "$line"
    case "$line" in *" PASS"*) ;; *) fail=1 ;; esac
  fi
done
grep -E "^(FLIGHTREC-VM-(BOOTED|BENCH|INFO|PANIC-CHECK|PANIC-RECORD)|SPLAT)" "$LOG.txt" || true
# The debug kernel: any checker's report anywhere on the console (boot, a
# scenario, between them) fails the run; its first lines are shown.
DEBUG_SPLAT='BUG:|WARNING:|KASAN|lockdep|possible circular locking|possible recursive locking'
DEBUG_SPLAT="$DEBUG_SPLAT|inconsistent lock state|Invalid wait context|suspicious RCU usage"
DEBUG_SPLAT="$DEBUG_SPLAT|sleeping function called from invalid context|scheduling while atomic"
if [ "$FLAVOUR" = debug ] && grep -qE "$DEBUG_SPLAT" "$LOG.txt"; then
  echo "FLIGHTREC-VM-RESULT debug-splat FAIL the debug kernel reported:"
  grep -m1 -E -A30 "$DEBUG_SPLAT" "$LOG.txt" | sed 's/^/  console: /'
  fail=1
fi
if [ $fail -ne 0 ]; then
  echo "=== console log tail:"; tail -80 "$LOG.txt"
fi
printf 'timing (%s): module builds %.1fs (dkms %.1fs), initramfs %.1fs, qemu %.1fs\n' "$KVER" \
  "$(echo "$t1 - $t0" | bc)" "$(echo "$tdk1 - $tdk0" | bc)" "$(echo "$t2 - $t1" | bc)" "$(echo "$t3 - $t2" | bc)"
exit $fail
