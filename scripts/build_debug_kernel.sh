#!/bin/bash
# Builds the debug kernel the VM tests boot when it is there
# (tests/vm/run_vm_tests.sh --flavour debug): Debian's linux-source-6.12,
# "make tinyconfig" plus scripts/debug_kernel.config (PREEMPT_RT, lockdep,
# DEBUG_ATOMIC_SLEEP, DEBUG_PREEMPT, KASAN, the QEMU guest's drivers built
# in).  The build tree is cached outside the checkout, in
#   ${FR_DEBUG_KERNEL_CACHE:-/var/cache/flightrec/debug-kernel}/<key>/
# where <key> names the source package's version and the config fragment's
# hash; it holds bzImage and linux/, a tree flightrec.ko builds against
# (make -C <dir>/linux M=...).  A finished build is marked by <dir>/complete;
# an interrupted one is started over.
#
# usage: build_debug_kernel.sh [--print-dir] [--jobs N]
#   --print-dir  print the cache directory for the current source and config
#                and exit 0 if it holds a finished build, 1 if not (no build)
#   --jobs N     make -jN (default 2)
# It takes about an hour on two cores shared with other builds
# (module/README.md has the measured figure).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
FRAG="$SRC/scripts/debug_kernel.config"
PKG=linux-source-6.12
TARBALL=/usr/src/$PKG.tar.xz
CACHE=${FR_DEBUG_KERNEL_CACHE:-/var/cache/flightrec/debug-kernel}
JOBS=2
PRINT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --print-dir) PRINT=1; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_debug_kernel: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# The key: what the kernel is built from.  RECIPE names the build steps
# below: change it with them, so that a changed recipe never reuses an old
# tree.
RECIPE="tinyconfig+fragment, make all, v1"
ver=$(dpkg-query -W -f '${Version}' "$PKG" 2>/dev/null || true)
if [ -z "$ver" ] || [ ! -f "$TARBALL" ]; then
  if [ -n "$PRINT" ]; then echo "$CACHE/(no $PKG installed)"; exit 1; fi
  echo "build_debug_kernel: $PKG is not installed (apt-get install $PKG)" >&2
  exit 1
fi
hash=$( (cat "$FRAG"; echo "$RECIPE") | sha256sum | cut -c1-12)
DIR="$CACHE/6.12-$ver-$hash"
if [ -n "$PRINT" ]; then
  echo "$DIR"
  [ -f "$DIR/complete" ]
  exit
fi
if [ -f "$DIR/complete" ]; then
  echo "build_debug_kernel: cached: $DIR ($(cat "$DIR/kernelrelease"))"
  exit 0
fi

rm -rf "$DIR"
mkdir -p "$DIR"
t0=$(date +%s)
echo "build_debug_kernel: unpacking $TARBALL into $DIR"
tar -C "$DIR" -xf "$TARBALL"
mv "$DIR/$PKG" "$DIR/linux"
K="$DIR/linux"
MK=(nice -n 10 make -C "$K" ARCH=x86_64 LOCALVERSION=-frdebug)
"${MK[@]}" -s tinyconfig
"$K/scripts/kconfig/merge_config.sh" -m -O "$K" "$K/.config" "$FRAG" > "$DIR/config.log"
"${MK[@]}" -s olddefconfig
# Every line of the fragment must have survived olddefconfig (a dependency
# it lacks drops an option silently).
bad=0
while IFS= read -r l; do
  case "$l" in
    CONFIG_*=n) grep -q "^${l%=n}=" "$K/.config" && { echo "build_debug_kernel: ${l%=n} is set"; bad=1; } ;;
    CONFIG_*) grep -qx "$l" "$K/.config" ||
                { echo "build_debug_kernel: $l did not hold: $(grep "${l%%=*}[= ]" "$K/.config")"; bad=1; } ;;
  esac
done < "$FRAG"
[ $bad -eq 0 ] || exit 1
echo "build_debug_kernel: building $("${MK[@]}" -s kernelrelease) with -j$JOBS (log: $DIR/build.log)"
"${MK[@]}" -j"$JOBS" all > "$DIR/build.log" 2>&1 || { tail -40 "$DIR/build.log"; exit 1; }
cp "$K/arch/x86/boot/bzImage" "$DIR/bzImage"
"${MK[@]}" -s kernelrelease > "$DIR/kernelrelease"
t1=$(date +%s)
echo "$((t1 - t0)) s, make -j$JOBS, load $(cut -d' ' -f1-3 /proc/loadavg) at the end" > "$DIR/build-time"
touch "$DIR/complete"
echo "build_debug_kernel: done in $((t1 - t0)) s: $DIR"
