#!/bin/bash
# Builds flightrec.ko (W=1, any warning fails) and the NMI torture driver
# against every Debian kernel-header flavour scripts/setup.sh --vm installs:
# generic (linux-headers-amd64), cloud (linux-headers-cloud-amd64) and rt
# (linux-headers-rt-amd64, PREEMPT_RT).  A missing flavour fails: CI builds all.
# usage: build_flavours.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
for fl in generic cloud rt; do
  kv=""
  for d in $(ls -d /lib/modules/*/build 2>/dev/null | sort -V -r); do
    v=${d#/lib/modules/}; v=${v%/build}
    case "$fl:$v" in
      generic:*-rt-amd64 | generic:*-cloud-amd64) continue ;;
      generic:*-amd64 | cloud:*-cloud-amd64 | rt:*-rt-amd64) kv=$v; break ;;
    esac
  done
  if [ -z "$kv" ]; then
    echo "FAIL $fl: no linux-headers for this flavour (scripts/setup.sh --vm installs it)"; fail=1; continue
  fi
  m="$WORK/$fl/mod" n="$WORK/$fl/nmi"
  mkdir -p "$m" "$n"
  cp "$SRC"/module/Kbuild "$SRC"/module/VERSION "$SRC"/module/*.c "$SRC"/module/*.h "$m/"
  cp -r "$SRC/module/uapi" "$m/"
  cp "$SRC/tests/vm/fr_nmi_torture.c" "$n/"
  echo 'obj-m += fr_nmi_torture.o' > "$n/Kbuild"
  if ! make -s -C "/lib/modules/$kv/build" M="$m" W=1 modules > "$WORK/$fl.log" 2>&1 ||
     ! make -s -C "/lib/modules/$kv/build" M="$n" KBUILD_EXTRA_SYMBOLS="$m/Module.symvers" W=1 \
       modules >> "$WORK/$fl.log" 2>&1; then
    cat "$WORK/$fl.log"; echo "FAIL $fl ($kv): build failed"; fail=1; continue
  fi
  if grep -i warning "$WORK/$fl.log" | grep -v "Skipping BTF"; then
    echo "FAIL $fl ($kv): warnings"; fail=1; continue
  fi
  echo "PASS $fl ($kv): $(modinfo -F vermagic "$m/flightrec.ko") version $(modinfo -F version "$m/flightrec.ko")"
done
exit $fail
