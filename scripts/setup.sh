#!/usr/bin/env bash
# Installs everything flightrec needs from Debian packages and builds it.
# Idempotent: packages already present are not reinstalled; the build is
# incremental. Usage: scripts/setup.sh [--no-build] [--vm [--debug-kernel]]
# --debug-kernel (with --vm) also builds the debug kernel the VM tests boot
# when it is cached (scripts/build_debug_kernel.sh, about an hour on two
# busy cores; a no-op once cached).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}
want_build=1
want_vm=0
want_debugk=0
for arg in "$@"; do
  case "$arg" in
    --no-build) want_build=0 ;;
    --vm) want_vm=1 ;;
    --debug-kernel) want_debugk=1 ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

PKGS=(
  build-essential cmake ninja-build pkg-config clang-format
  libzstd-dev zstd libsqlite3-dev sqlite3 libxxhash-dev
  libboost-dev libboost-system-dev libunwind-dev libdw-dev libelf-dev libdebuginfod-dev debuginfod elfutils zlib1g-dev libacl1-dev
  libseccomp-dev
  # Intel PT decoding (recorder trace) and the packet encoder its tests use.
  libipt-dev
  # sd-journal: each stored crash's journal entry; journald itself runs in
  # tests/journal (systemd-journald, journalctl).
  libsystemd-dev systemd
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  linux-perf gdb valgrind golang-go util-linux bsdutils procps psmisc time python3 binutils
  protobuf-compiler
  clang libclang-rt-14-dev
  chromium
  # Fleet mode's index (issue 16): libpq and libcrypto's SHA-256; the tests
  # and the benchmark run a real PostgreSQL 15 server (as its `postgres` account).
  libpq-dev libssl-dev postgresql-15
  # Fleet mode: the S3 client (libcurl's SigV4 signing, OpenSSL digests) and
  # the single-node Ceph cluster with its S3 gateway the fleet tests and
  # bench/fleet start (tests/fleet/ceph_cluster.sh); s3cmd is the peer.
  libcurl4-openssl-dev curl ceph-mon ceph-mgr ceph-osd radosgw s3cmd
  # bench/: the cost curves (issue 17) are drawn as PNG by gnuplot.
  gnuplot-nox
)
# Node.js runs the speedscope check (tests/export/speedscope); Debian's nodejs
# and npm unless a node with npm is already there (Debian's npm package
# conflicts with other builds of node that bundle their own npm).
command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
# The VM harness (tests/vm) boots Debian 12's kernels under QEMU (6.1
# generic and PREEMPT_RT, 6.12 generic; one boot each) and builds the module
# against their headers and the cloud flavour's, of both series
# (module_build_flavours); dkms builds it the way a package install would
# (scenario dkms).
VM_PKGS=(qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static kmod cpio
  linux-image-rt-amd64 linux-headers-rt-amd64 linux-headers-cloud-amd64 dkms)
# Debian 12's 6.12 LTS kernels (linux-image-6.12.N+deb12-*): their patch level moves with each point release, and an image can
# appear before its headers, so take the newest 6.12.N for which the
# archive has every package we need (apt-cache, after an update).
vm_612_version() {
  local v p
  for v in $(apt-cache pkgnames linux-image-6.12. |
    sed -n 's/^linux-image-\(6\.12\.[0-9]*\)+deb12-amd64$/\1/p' | sort -V -r); do
    for p in image-"$v"+deb12-amd64 image-"$v"+deb12-rt-amd64 headers-"$v"+deb12-amd64 \
      headers-"$v"+deb12-cloud-amd64 headers-"$v"+deb12-rt-amd64; do
      apt-cache show "linux-$p" > /dev/null 2>&1 || continue 2
    done
    echo "$v"
    return
  done
}
if [ "$want_vm" = 1 ]; then
  PKGS+=("${VM_PKGS[@]}")
  # The debug kernel's source and build needs.
  [ "$want_debugk" = 1 ] && PKGS+=(linux-source-6.12 flex bison bc libelf-dev libssl-dev)
  # Installed 6.12 images and headers are enough: no apt-get update on
  # every run.
  if ! ls /boot/vmlinuz-6.12.*+deb12-{,rt-}amd64 /lib/modules/6.12.*+deb12-amd64/build > /dev/null 2>&1 ||
    ! ls /lib/modules/6.12.*+deb12-{cloud,rt}-amd64/build > /dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && apt-get update -qq
    v612=$(vm_612_version)
    [ -n "$v612" ] || { echo "setup: no Debian 6.12 kernel with all its headers in apt" >&2; exit 1; }
    PKGS+=(linux-image-"$v612"+deb12-amd64 linux-image-"$v612"+deb12-rt-amd64
      linux-headers-"$v612"+deb12-amd64 linux-headers-"$v612"+deb12-cloud-amd64
      linux-headers-"$v612"+deb12-rt-amd64)
  fi
fi

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

# The JS packages the Chrome trace export is tested with (speedscope's web app
# and puppeteer-core to drive Debian's chromium), at the versions pinned in
# tests/export/speedscope/package.json, into the build directory (never
# committed); reinstalled only when the pins change.
npm_dir="$BUILD_DIR/npm"
mkdir -p "$npm_dir"
if ! cmp -s tests/export/speedscope/package.json "$npm_dir/package.json" ||
  [ ! -d "$npm_dir/node_modules/speedscope" ] || [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
  echo "setup: npm install into $npm_dir"
  cp tests/export/speedscope/package.json "$npm_dir/package.json"
  npm install --prefix "$npm_dir" --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null
fi

# C++ is built with line tables only (-g1): backtraces, file:line and the
# symbolizer's view of our own binaries are the same, and it compiles about a
# quarter faster (report_commands.cc: 9.4 s of CPU against 13.0 s with -g),
# which is most of a fresh machine's setup time.  The test programs whose
# DWARF the tests read (tests/programs, tests/unwind, tests/attribution) set
# -g themselves and keep full debug information.
if [ "$want_build" = 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi
if [ "$want_vm" = 1 ] && [ "$want_debugk" = 1 ]; then
  scripts/build_debug_kernel.sh
fi
