#!/usr/bin/env bash
# Sets up (packages + build) and runs every test: unit, root-only host
# integration tests, and the VM tests that load flightrec.ko into a real kernel.
# Fails if any test fails or is skipped.  Usage: scripts/test.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}

scripts/setup.sh --vm

log=$(mktemp)
fuzz_log=$(mktemp)
fuzz_build_log=$(mktemp)
trap 'rm -f "$log" "$fuzz_log" "$fuzz_build_log"' EXIT
# The fuzz harness (a clang ASan/UBSan build, ~2.5 min of both CPUs from an
# empty ccache) builds in the background while ctest runs, at nice 19: the
# tests keep the CPUs whenever they want them (a nice-19 task gets ~1.5% of
# a CPU against a nice-0 one), and the build uses what they leave, mostly
# while the QEMU guests boot and the services of the fleet test wait.
nice -n 19 scripts/fuzz.sh --build-only >"$fuzz_build_log" 2>&1 &
fuzz_build_pid=$!
# Serial on purpose: several tests measure rates and exact kernel counters, and
# the QEMU guest runs under software emulation; two at once on a 2-core
# machine distort each other.
set +e
ctest --test-dir "$BUILD_DIR" --output-on-failure "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
wait "$fuzz_build_pid"
fuzz_build_rc=$?
set -e

# The fuzz job (scripts/fuzz.sh: clang, ASan/UBSan, the regression corpora
# then ${FUZZ_SECONDS:-30} s of fuzzing, two thirds records and one third
# panic regions, its own build-fuzz/). Counted
# as one more test: any finding fails the run.  30 s here, not fuzz.sh's 90:
# every CI run replays the whole corpus and adds a short fresh search; the
# suite has to stay well under 20 minutes (longer searches: scripts/fuzz.sh N).
fuzz_failed=0
if [ "$fuzz_build_rc" != 0 ]; then
  tail -n 60 "$fuzz_build_log"
  echo "test.sh: the fuzz harness did not build" >&2
  fuzz_failed=1
  rc=1
elif scripts/fuzz.sh "${FUZZ_SECONDS:-30}" >"$fuzz_log" 2>&1; then
  tail -n 3 "$fuzz_log"
else
  tail -n 60 "$fuzz_log"
  echo "test.sh: scripts/fuzz.sh failed (a finding is in build-fuzz/findings/)" >&2
  fuzz_failed=1
  rc=1
fi
# A skipped test hides a missing feature: CTest's "Not Run"/"Skipped" and
# GoogleTest's "[  SKIPPED ]" both count as failures here.
if grep -Eq '\*\*\*Skipped|Not Run|\[  SKIPPED \]' "$log"; then
  echo "test.sh: some tests were skipped; that counts as a failure" >&2
  rc=1
fi
# The debug kernel (lockdep, KASAN, PREEMPT_RT) is used when it is cached
# and named when it is not: its build is an hour, more than the suite.
if ! scripts/build_debug_kernel.sh --print-dir >/dev/null 2>&1; then
  echo "test.sh: NOTE: the debug kernel is not cached, so the VM scenarios did not run on it" \
    "(vm_module_scenarios_debug); scripts/setup.sh --vm --debug-kernel builds it (about an hour)"
fi
# The last line (alone, on stdout) is the count CI reads: ctest's tests plus
# the fuzz job. CTest counts a skipped test as passed; here it is a failure.
# No ctest summary at all (ctest did not run) is one more failure.
skipped=$(grep -Ec '\*\*\*Skipped' "$log" || true)
if summary=$(grep -Eo '[0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1); then
  failed=$(echo "$summary" | awk '{print $1}')
  total=$(echo "$summary" | awk '{print $NF}')
else
  failed=1 total=1 skipped=0
  rc=1
fi
echo "$((total - failed - skipped + 1 - fuzz_failed)) passed, $((failed + skipped + fuzz_failed)) failed"
exit "$rc"
