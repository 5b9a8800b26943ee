#!/bin/bash
# Builds flightrec.ko (W=1, any warning fails), its test build (with
# tests/vm/fr_test_hooks.c, FR_TEST_HOOKS=y) and the NMI torture driver
# against every Debian 12 kernel-header set scripts/setup.sh --vm installs:
# both kernel series, 6.1 (linux-headers-amd64 and its -cloud-, -rt-) and
# 6.12 (linux-headers-6.12.*+deb12-amd64 and its -cloud-, -rt-), each in three
# flavours: generic, cloud and rt (PREEMPT_RT), the newest of each installed.
# A missing one fails: CI builds all six.
# usage: build_flavours.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
# dkms.conf offers the module to every kernel built here and to none older
# than 6.1 (DKMS 3.0 matches BUILD_EXCLUSIVE_KERNEL against the version).
dk_kernel=$(bash -c 'source "$1" && echo "$BUILD_EXCLUSIVE_KERNEL"' sh "$SRC/module/dkms.conf")
dk_ok() { [[ $1 =~ $dk_kernel ]]; }
for v in 5.10.0-30-amd64 5.15.0-1-generic 6.0.0-1-amd64; do
  if dk_ok "$v"; then echo "FAIL dkms.conf: BUILD_EXCLUSIVE_KERNEL accepts $v"; fail=1; fi
done
for sf in 6.1:generic 6.1:cloud 6.1:rt 6.12:generic 6.12:cloud 6.12:rt; do
  series=${sf%%:*} fl=${sf#*:}
  kv=""
  for d in $(ls -d /lib/modules/*/build 2>/dev/null | sort -V -r); do
    v=${d#/lib/modules/}; v=${v%/build}
    case "$v" in "$series".*) ;; *) continue ;; esac
    case "$fl:$v" in
      generic:*-rt-amd64 | generic:*-cloud-amd64) continue ;;
      generic:*-amd64 | cloud:*-cloud-amd64 | rt:*-rt-amd64) kv=$v; break ;;
    esac
  done
  if [ -z "$kv" ]; then
    echo "FAIL $series $fl: no linux-headers for it (scripts/setup.sh --vm installs it)"; fail=1; continue
  fi
  m="$WORK/$series-$fl/mod" t="$WORK/$series-$fl/test" n="$WORK/$series-$fl/nmi"
  log="$WORK/$series-$fl.log"
  mkdir -p "$m" "$n"
  cp "$SRC"/module/Kbuild "$SRC"/module/VERSION "$SRC"/module/*.c "$SRC"/module/*.h "$m/"
  cp -r "$SRC/module/uapi" "$m/"
  cp -r "$m" "$t"
  cp "$SRC/tests/vm/fr_test_hooks.c" "$t/"
  cp "$SRC/tests/vm/fr_nmi_torture.c" "$n/"
  echo 'obj-m += fr_nmi_torture.o' > "$n/Kbuild"
  if ! make -s -j"$(nproc)" -C "/lib/modules/$kv/build" M="$m" W=1 modules > "$log" 2>&1 ||
     ! make -s -j"$(nproc)" -C "/lib/modules/$kv/build" M="$t" FR_TEST_HOOKS=y W=1 modules >> "$log" 2>&1 ||
     ! make -s -j"$(nproc)" -C "/lib/modules/$kv/build" M="$n" KBUILD_EXTRA_SYMBOLS="$t/Module.symvers" W=1 \
       modules >> "$log" 2>&1; then
    cat "$log"; echo "FAIL $series $fl ($kv): build failed"; fail=1; continue
  fi
  if grep -i warning "$log" | grep -v "Skipping BTF"; then
    echo "FAIL $series $fl ($kv): warnings"; fail=1; continue
  fi
  # The module a user builds (make, DKMS) has no test entry point.
  tp=$(modinfo -F parm "$m/flightrec.ko" | grep -i -E '^test|TESTS ONLY' || true)
  if [ -n "$tp" ] || grep -q flightrec_test "$m/Module.symvers"; then
    echo "FAIL $series $fl ($kv): test hooks in the production module: $tp" \
      "$(grep flightrec_test "$m/Module.symvers" || true)"; fail=1; continue
  fi
  if ! dk_ok "$kv"; then echo "FAIL dkms.conf: BUILD_EXCLUSIVE_KERNEL refuses $kv"; fail=1; continue; fi
  echo "PASS $series $fl ($kv): $(modinfo -F vermagic "$m/flightrec.ko") version $(modinfo -F version "$m/flightrec.ko")"
done
exit $fail
