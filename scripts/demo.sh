#!/usr/bin/env bash
# The main job on embedded defaults: install, build, then show flightrec
# working end to end on this machine (scripts/demo_recorder.sh): a workload's
# last seconds and report, then a crash under the core hook with its
# backtrace and history (core_pattern put back on exit). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}
scripts/setup.sh

exec scripts/demo_recorder.sh

