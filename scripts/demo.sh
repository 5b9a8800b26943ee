#!/usr/bin/env bash
# The main job on embedded defaults: install, build, then show flightrec
# working end to end on this machine. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}
scripts/setup.sh

exec scripts/demo_recorder.sh

