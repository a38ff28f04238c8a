#!/usr/bin/env bash
# --tiles auto against an exhaustive tile sweep, measured in the same run:
#   GEMM float32 4096^3 and 512 x 512 x 65536, ordered and REDUX.
# The sweep: mb = nb and kb over powers of two (4096^3: 128..4096 each;
# k-heavy: mb = nb 128..512, kb 256..65536); --tiles auto runs before, amid
# and after each sweep (3 and 4 times: the machine's noise). Prints, per
# case, the best sweep point, the auto point and its median time / the best
# time; the rows go to OUT.csv (default timing/results/tiles_auto_gemm.csv).
# Every point is the best of --niter runs (default 3). Then each case's best
# sweep point and auto run again, alternately, --rounds times each (default
# 3; 0: none): the best of many noisy points is biased low, the medians of
# these reruns (OUT_rerun.csv) compare the two fairly.
#   timing/run_tiles_auto_gemm.sh [--threads N] [--niter N] [--rounds N] [--build DIR] [--out OUT.csv]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 niter=3 rounds=3 build=build out=timing/results/tiles_auto_gemm.csv
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --niter) niter=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--niter N] [--rounds N] [--build DIR] [--out OUT.csv]" >&2; exit 2 ;;
  esac
done
exe=$build/timing/time_gemm
[ -x "$exe" ] || { echo "missing $exe (build it first)" >&2; exit 1; }
run() { "$exe" --threads "$threads" --niter "$niter" --warmup 1 --no-baseline "$@"; }
{
  run --m 4096 --n 4096 --k 4096 --mode ordered,redux --tiles auto
  for t in 128 256 512 1024 2048 4096; do
    run --m 4096 --n 4096 --k 4096 --mode ordered,redux --mb $t --nb $t --kb 128,256,512,1024,2048,4096 |
      tail -n +2
    if [ $t = 512 ] || [ $t = 4096 ]; then
      run --m 4096 --n 4096 --k 4096 --mode ordered,redux --tiles auto | tail -n +2
    fi
  done
  run --m 512 --n 512 --k 65536 --mode ordered,redux --tiles auto | tail -n +2
  for t in 128 256 512; do
    run --m 512 --n 512 --k 65536 --mode ordered,redux --mb $t --nb $t \
        --kb 256,512,1024,2048,4096,8192,16384,32768,65536 | tail -n +2
    run --m 512 --n 512 --k 65536 --mode ordered,redux --tiles auto | tail -n +2
  done
} > "$out"
# per shape and mode: the best manual point, the auto point (the median of
# its runs), their ratio
cases() { awk -F, 'NR > 1 { print $1 "x" $2 "x" $3 " " $10 "," $4 "x" $5 "x" $6 "," $15 "," $11 "," $16 }' "$1"; }
cases "$out" | awk -F, -f timing/auto_vs_best.awk
[ "$rounds" -gt 0 ] || exit 0
# the alternating reruns: each case's best sweep point against auto
rerun=${out%.csv}_rerun.csv
best=$(awk -F, 'NR > 1 && $15 == "manual" { c = $1 " " $2 " " $3 " " $10
                  if (!(c in s) || $11 < s[c]) { s[c] = $11; t[c] = $4 " " $5 " " $6 } }
                END { for (c in t) print c, t[c] }' "$out" | sort)
{
  head -1 "$out"
  for _ in $(seq "$rounds"); do
    while read -r m n k mode mb nb kb; do
      run --m "$m" --n "$n" --k "$k" --mode "$mode" --mb "$mb" --nb "$nb" --kb "$kb" | tail -n +2
      run --m "$m" --n "$n" --k "$k" --mode "$mode" --tiles auto | tail -n +2
    done <<< "$best"
  done
} > "$rerun"
echo "alternating reruns, $rounds each (medians):"
cases "$rerun" | awk -F, -v rerun=1 -f timing/auto_vs_best.awk
