#!/bin/bash
# Per-sample handler cost of flightrec.ko vs perf, in the QEMU guest (not
# part of ctest: speed goals live in bench/).  A fixed CPU-bound loop
# (fr_vm_test bench N) is timed with nothing recording, with the module at
# 10 kHz per CPU (cpu-clock, period 100 us) without and with a 1 KiB user
# stack copy, and under `perf record -a -g -e cpu-clock -c 100000`.
# Prints FLIGHTREC-VM-BENCH with the slowdown ratios.
# usage: bench/vm/run_vm_bench.sh BUILD_DIR   (needs fr_vm_test built there)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
exec "$SRC/tests/vm/run_vm_tests.sh" --build-dir "${1:?build dir}" bench
