#!/usr/bin/env bash
# --tiles auto against an exhaustive tile sweep, measured in the same run:
#   GEMM float32 4096^3 and 512 x 512 x 65536, ordered and REDUX.
# The sweep: mb = nb and kb over powers of two (4096^3: 128..4096 each;
# k-heavy: mb = nb 128..512, kb 256..65536). Prints, per case, the best
# sweep point, the auto point and auto's time / the best time; the rows go
# to OUT.csv (default timing/results/tiles_auto_gemm.csv).
#   timing/run_tiles_auto_gemm.sh [--threads N] [--build DIR] [--out OUT.csv]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 build=build out=timing/results/tiles_auto_gemm.csv
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--build DIR] [--out OUT.csv]" >&2; exit 2 ;;
  esac
done
exe=$build/timing/time_gemm
[ -x "$exe" ] || { echo "missing $exe (build it first)" >&2; exit 1; }
run() { "$exe" --threads "$threads" --niter 3 --warmup 1 --no-baseline "$@"; }
{
  run --m 4096 --n 4096 --k 4096 --mode ordered,redux --tiles auto
  for t in 128 256 512 1024 2048 4096; do
    run --m 4096 --n 4096 --k 4096 --mode ordered,redux --mb $t --nb $t --kb 128,256,512,1024,2048,4096 |
      tail -n +2
  done
  run --m 512 --n 512 --k 65536 --mode ordered,redux --tiles auto | tail -n +2
  for t in 128 256 512; do
    run --m 512 --n 512 --k 65536 --mode ordered,redux --mb $t --nb $t \
        --kb 256,512,1024,2048,4096,8192,16384,32768,65536 | tail -n +2
  done
} > "$out"
# per shape and mode: the best manual point, the auto point, their ratio
awk -F, 'NR > 1 {
  key = $1 "x" $2 "x" $3 " " $10
  if ($15 == "manual" && (!(key in best) || $11 < best[key])) { best[key] = $11; bt[key] = $4 "x" $5 "x" $6 }
  if ($15 == "auto") { auto[key] = $11; at[key] = $4 "x" $5 "x" $6; pred[key] = $16 }
} END {
  printf "%-24s %-16s %9s %-16s %9s %9s %10s\n", "case", "best sweep", "s", "auto", "s", "predicted", "auto/best"
  for (k in auto)
    printf "%-24s %-16s %9.4f %-16s %9.4f %9.4f %10.3f\n", k, bt[k], best[k], at[k], auto[k], pred[k], auto[k] / best[k]
}' "$out"
