#!/usr/bin/env bash
# --tiles auto against an exhaustive tile sweep, measured in the same run:
#   causal flash attention, T 4096 (hd 64, 4 heads), forward and backward
#   (ordered and REDUX). The sweep: qb and kb over 64..1024; --tiles auto
#   runs before, amid and after it (the machine's noise). Prints, per pass,
#   the best sweep point, the auto point and its median time / the best
#   time (every point the best of --niter runs, default 3); the rows go to
#   OUT.csv (default timing/results/tiles_auto_attention.csv).
#   timing/run_tiles_auto_attention.sh [--threads N] [--niter N] [--T N] [--build DIR] [--out OUT.csv]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 niter=3 T=4096 build=build out=timing/results/tiles_auto_attention.csv
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --niter) niter=$2; shift 2 ;;
    --T) T=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--niter N] [--T N] [--build DIR] [--out OUT.csv]" >&2; exit 2 ;;
  esac
done
exe=$build/timing/time_attention
[ -x "$exe" ] || { echo "missing $exe (build it first)" >&2; exit 1; }
run() { "$exe" --threads "$threads" --T "$T" --niter "$niter" --warmup 1 --no-naive --pass fwd,bwd --mode ordered,redux "$@"; }
{
  run --tiles auto
  run --tiles manual --qb 64,128 --kb 64,128,256,512,1024 | tail -n +2
  run --tiles auto | tail -n +2
  run --tiles manual --qb 256,512,1024 --kb 64,128,256,512,1024 | tail -n +2
  run --tiles auto | tail -n +2
} > "$out"
# per pass and mode: the best manual point, the auto point (the median of
# its runs), their ratio
awk -F, 'NR > 1 { print "T " $1 " " $8 " " $9 "," $5 "x" $6 "," $18 "," $10 "," $19 }' "$out" |
  awk -F, -f timing/auto_vs_best.awk
