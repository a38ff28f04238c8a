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
# (relative paths from the repository's root; the skeleton: timing/lib/tiles_auto.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2034
PROG=run_tiles_auto_gemm.sh
# shellcheck source=lib/tiles_auto.sh
. timing/lib/tiles_auto.sh
exe_name=timing/time_gemm out=timing/results/tiles_auto_gemm.csv
usage="usage: $0 [--threads N] [--niter N] [--rounds N] [--build DIR] [--out OUT.csv]"
run() { "$exe" --threads "$threads" --niter "$niter" --warmup 1 --no-baseline "$@"; }
sweep() {
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
}
# per shape and mode
cases() { awk -F, 'NR > 1 { print $1 "x" $2 "x" $3 " " $10 "," $4 "x" $5 "x" $6 "," $15 "," $11 "," $16 }' "$1"; }
best_points() {
  awk -F, 'NR > 1 && $15 == "manual" { c = $1 " " $2 " " $3 " " $10
             if (!(c in s) || $11 < s[c]) { s[c] = $11; t[c] = $4 " " $5 " " $6 } }
           END { for (c in t) print c, t[c] }' "$1" | sort
}
rerun_point() { # m n k mode mb nb kb
  run --m "$1" --n "$2" --k "$3" --mode "$4" --mb "$5" --nb "$6" --kb "$7" | tail -n +2
  run --m "$1" --n "$2" --k "$3" --mode "$4" --tiles auto | tail -n +2
}
tiles_auto_main "$@"
