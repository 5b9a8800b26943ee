#!/usr/bin/env bash
# The fuzz job: builds fuzz/record_fuzzer (records) and fuzz/panic_fuzzer
# (kernel panic regions) (libFuzzer, ASan + UBSan, clang) in build-fuzz/,
# replays each one's seed and regression corpora, then fuzzes each for a share
# of a bounded time (two thirds records, one third panic regions). Exits
# non-zero on any finding (crash, sanitizer report, leak, timeout,
# out-of-memory); the input is left in build-fuzz/findings/ — fix the bug and
# add the input to fuzz/regression/ (a panic region's to fuzz/regression/panic/).
# Usage: scripts/fuzz.sh [SECONDS]   (default 90; $FUZZ_SECONDS also works)
#        scripts/fuzz.sh --build-only  (the harnesses only: scripts/test.sh
#        builds them in the background while ctest runs, then fuzzes)
# Budget (2 cores): with a warm ccache ~100 s in all (build ~3 s, corpus
# replay ~8 s, fuzzing 90 s); from an empty ccache the build is ~310 s of CPU,
# ~2.5-3 min of wall time on an idle machine, so the job stays under 5 min.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
SECONDS_TO_FUZZ=${1:-${FUZZ_SECONDS:-90}}
BUILD=${FLIGHTREC_FUZZ_BUILD_DIR:-build-fuzz}
CC_BIN=${FUZZ_CC:-clang}
CXX_BIN=${FUZZ_CXX:-clang++}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

start=$(date +%s)
# -O1 -gline-tables-only: sanitizer reports keep file:line, and the build
# (all of it ASan/UBSan code) takes about half the time of -O2 -g, which
# matters for a CI job that starts with an empty ccache.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" "${launcher[@]}" \
  -DFLIGHTREC_FUZZ=ON -DFLIGHTREC_WERROR=ON \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $SAN" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link $SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="$SAN" >/dev/null
# Only the harnesses and the libraries they link, not the whole tree.
cmake --build "$BUILD" -j"$(nproc)" --target record_fuzzer panic_fuzzer
built=$(date +%s)
echo "fuzz.sh: built in $((built - start)) s"
[ "$build_only" = 1 ] && exit 0

fuzzer="$BUILD/fuzz/record_fuzzer"
panic_fuzzer="$BUILD/fuzz/panic_fuzzer"
# Each target's share of the time, at least 1 s each (-max_total_time=0 would
# mean no limit).
panic_seconds=$(( SECONDS_TO_FUZZ / 3 > 0 ? SECONDS_TO_FUZZ / 3 : 1 ))
record_seconds=$(( SECONDS_TO_FUZZ - panic_seconds > 0 ? SECONDS_TO_FUZZ - panic_seconds : 1 ))
mkdir -p "$BUILD/corpus" "$BUILD/corpus-panic" "$BUILD/findings"
# A crash ends ASan's run with an abort, as it would in the field.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
common=(-timeout=30 -rss_limit_mb=2048 -max_len=65536
        -artifact_prefix="$BUILD/findings/")

# 1. Every input that ever crashed, and the seeds, once each, through every
# output variant of every command (libFuzzer reads directories recursively:
# the panic regions in panic/ go through the record harness's entry too).
FLIGHTREC_FUZZ_EVERY_VARIANT=1 "$fuzzer" "${common[@]}" -runs=0 fuzz/regression fuzz/seeds
"$panic_fuzzer" "${common[@]}" -runs=0 fuzz/regression/panic fuzz/seeds/panic
# 2. Bounded fuzzing from the seeds (new inputs kept in $BUILD/corpus*).
"$fuzzer" "${common[@]}" -max_total_time="$record_seconds" -print_final_stats=1 \
  "$BUILD/corpus" fuzz/seeds
"$panic_fuzzer" "${common[@]}" -max_total_time="$panic_seconds" -print_final_stats=1 \
  "$BUILD/corpus-panic" fuzz/seeds/panic
echo "fuzz.sh: no findings in ${record_seconds} s of record and ${panic_seconds} s of panic" \
  "region fuzzing ($(( $(date +%s) - start )) s in all)"
