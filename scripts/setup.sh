#!/usr/bin/env bash
# Installs everything flightrec needs from Debian packages and builds it.
# Idempotent: packages already present are not reinstalled; the build is
# incremental. Usage: scripts/setup.sh [--no-build] [--vm]
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}
want_build=1
want_vm=0
for arg in "$@"; do
  case "$arg" in
    --no-build) want_build=0 ;;
    --vm) want_vm=1 ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

PKGS=(
  build-essential cmake ninja-build pkg-config clang-format
  libzstd-dev zstd libsqlite3-dev sqlite3 libxxhash-dev
  libboost-dev libboost-system-dev libunwind-dev libdw-dev libelf-dev elfutils zlib1g-dev libacl1-dev
  libseccomp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  linux-perf gdb golang-go util-linux bsdutils procps psmisc time python3 binutils
  clang libclang-rt-14-dev
  nodejs
)
# The VM harness (tests/vm) boots Debian's kernel under QEMU and builds the
# module against its headers.
VM_PKGS=(qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static kmod cpio)
[ "$want_vm" = 1 ] && PKGS+=("${VM_PKGS[@]}")

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then
    echo "setup: need root to apt-get install the packages above" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$want_build" = 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi
