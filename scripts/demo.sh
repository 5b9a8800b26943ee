#!/usr/bin/env bash
# The main job on embedded defaults: install, build, then show flightrec
# working end to end on this machine. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FLIGHTREC_BUILD_DIR:-build}
scripts/setup.sh

export FLIGHTREC_STORE=${FLIGHTREC_STORE:-$(mktemp -d /tmp/flightrec-demo.XXXXXX)/store}
R="$BUILD_DIR/recorder/cli/recorder"

if [ -x "$BUILD_DIR/recorder/daemon/recorderd" ] && [ -x "$BUILD_DIR/tests/programs/fr_spin" ]; then
  exec scripts/demo_recorder.sh
fi

# Store demonstration (until the recorder lands): write records through the
# store's atomic commit, list, inspect and verify them.
echo "== writing 3 records into $FLIGHTREC_STORE"
"$BUILD_DIR/tests/store/store_stress_helper" write "$FLIGHTREC_STORE" /dev/null 3 200000
echo "== recorder list"
"$R" list
echo "== recorder info -1"
"$R" info -1
echo "== recorder verify"
"$R" verify
