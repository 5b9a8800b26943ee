# Sourced first by the bench scripts (bench/*/bench_*.sh): strict mode, the
# repository root as the working directory, the build directory in $B, the
# CPU count in $ncpu, a scratch directory and the helpers they share.
# shellcheck shell=bash
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck disable=SC2034  # B and ncpu are for the scripts that source this
B=${FLIGHTREC_BUILD_DIR:-build}
ncpu=$(nproc)

# What a script puts back on exit before its scratch directory goes; a
# script that changes anything outside it defines its own.
bench_cleanup() { :; }

# bench_workdir TEMPLATE: makes the scratch directory $work (mktemp -d
# TEMPLATE), removed on exit after bench_cleanup.
bench_workdir() {
  work=$(mktemp -d "$1")
  trap 'bench_cleanup; rm -rf "$work"' EXIT
}

# The median of the numbers on stdin, one a line.
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# bench_plot PNG TITLE XLABEL YLABEL DATA SERIES...: draws the whitespace
# table DATA ('#' lines are comments; column 1 is x) as a log-log PNG (gnuplot),
# one line per SERIES "COLUMN:title" (COLUMN counted from 1).
bench_plot() {
  local png=$1 title=$2 xlabel=$3 ylabel=$4 data=$5
  shift 5
  local plots="" s
  for s in "$@"; do
    plots+="${plots:+, }'$data' using 1:${s%%:*} with linespoints lw 2 title '${s#*:}'"
  done
  gnuplot <<GP
set terminal pngcairo size 720,440 font ",10"
set output '$png'
set title '$title'
set xlabel '$xlabel'
set ylabel '$ylabel'
set logscale xy
set grid
set key top left
plot $plots
GP
  echo "plot: $png"
}
