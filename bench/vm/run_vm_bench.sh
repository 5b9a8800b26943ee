#!/bin/bash
# Per-sample cost of flightrec.ko vs perf at the same rate, in the QEMU guest
# (not part of ctest: speed goals live in bench/). Prints FLIGHTREC-VM-BENCH
# lines.
#
# hcost: ns per sample where it is paid, the same way for both: the guest
#   kernel's function_graph tracer times every __perf_event_overflow() call
#   (flightrec's handler runs inside it, as perf's output path does);
#   flightrec.ko (stack_bytes=0, fp chains) vs recorderd's perf backend
#   (--backend perf -F 10000 --event cpu-clock), cpu-clock period 100 us on
#   every CPU, one CPU-bound loop per CPU, FR_BENCH_ROUNDS (default 5)
#   alternating rounds of FR_BENCH_BLOCKS (default 1500) blocks, medians and
#   range; plus the module's own STATS handler_ns per sample and the loops'
#   slowdown. Needs fr_vm_test, recorder and recorderd built. Run it on a
#   quiet host: TCG guest time shrinks with host load while the sampling
#   timers keep wall-clock pace.
# bench: a fixed CPU-bound loop (fr_vm_test bench N) timed with nothing
#   recording, under recorderd on the module (10 kHz per CPU, without and with
#   a 1 KiB user stack copy), under `recorderd --backend perf -F 10000`, and
#   under `perf record -a -g`; then `recorder dump --last 5s` latency. Needs
#   recorder and recorderd built too.
# usage: bench/vm/run_vm_bench.sh BUILD_DIR [scenario...]   (default: hcost bench)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:?build dir}
shift
[ $# -gt 0 ] || set -- hcost bench
exec "$SRC/tests/vm/run_vm_tests.sh" --build-dir "$BUILD" "$@"
