#!/usr/bin/env bash
# The store's everyday commands vs records in the store (issue 17):
# `recorder list -1`, `list --pid`, `crash list -1`, `crash info` (by id and
# by suffix), `vacuum`, the hook's store open and crash commit, and the full
# `recorder list` (whose output is every record), at each count, median of
# RUNS. The store is filled through the store library (bench_store_scale) on
# tmpfs: the fill fsyncs every record and the disk is not what is measured.
# Writes DIR/store_scale.dat and DIR/store_scale.png.
# Usage: bench/store/bench_store_scale.sh [COUNTS] [RUNS] [DIR]
source "$(dirname "$0")/../common.sh"
COUNTS=${1:-100,1000,10000,100000}
RUNS=${2:-5}
OUT=${3:-bench-out}
mkdir -p "$OUT"
bench_workdir /dev/shm/flightrec-bench-store.XXXXXX
dat="$OUT/store_scale.dat"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$B/bench/store/bench_store_scale" --dir "$work/store" --recorder "$(readlink -f "$B/recorder/cli/recorder")" \
  --counts "$COUNTS" --runs "$RUNS" | tee "$dat"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$dat"
bench_plot "$OUT/store_scale.png" "Store commands vs records in the store (median of $RUNS)" \
  "records in the store" "ms" "$dat" \
  "2:list -1" "3:list --pid" "4:crash list -1" "5:crash info ID" "6:crash info SUFFIX" \
  "7:vacuum" "8:hook: store open" "9:hook: commit" "10:list (all rows)"
