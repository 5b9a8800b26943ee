#!/bin/bash
# Per-sample cost of flightrec.ko vs recorderd's perf backend at the same
# rate, in the QEMU guest (not part of ctest: speed goals live in bench/).
# A fixed CPU-bound loop (fr_vm_test bench N) is timed with nothing
# recording, with the module at 10 kHz per CPU (cpu-clock, period 100 us)
# without and with a 1 KiB user stack copy, under `recorderd --backend perf
# -F 10000`, and under `perf record -a -g` (reference); rounds alternate,
# medians. Then `recorder dump --last 5s` latency with recorderd on each
# backend. Prints FLIGHTREC-VM-BENCH lines.
# usage: bench/vm/run_vm_bench.sh BUILD_DIR   (needs fr_vm_test built there)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
exec "$SRC/tests/vm/run_vm_tests.sh" --build-dir "${1:?build dir}" bench
