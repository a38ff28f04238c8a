#!/usr/bin/env bash
# --tiles auto against an exhaustive tile sweep, measured in the same run:
#   causal flash attention, T 4096 (hd 64, 4 heads), forward and backward
#   (ordered and REDUX). The sweep: qb and kb over 64..1024; --tiles auto
#   runs before, amid and after it (the machine's noise). Prints, per pass,
#   the best sweep point, the auto point and its median time / the best
#   time (every point the best of --niter runs, default 3); the rows go to
#   OUT.csv (default timing/results/tiles_auto_attention.csv). Then each
#   pass's best sweep point and auto run again, alternately, --rounds times
#   each (default 3; 0: none; rows in OUT_rerun.csv): the best of 25 noisy
#   points is biased low, the medians of these reruns compare them fairly.
#   timing/run_tiles_auto_attention.sh [--threads N] [--niter N] [--rounds N] [--T N] [--build DIR] [--out OUT.csv]
# (relative paths from the repository's root; the skeleton: timing/lib/tiles_auto.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2034
PROG=run_tiles_auto_attention.sh
# shellcheck source=lib/tiles_auto.sh
. timing/lib/tiles_auto.sh
exe_name=timing/time_attention out=timing/results/tiles_auto_attention.csv T=4096
usage="usage: $0 [--threads N] [--niter N] [--rounds N] [--T N] [--build DIR] [--out OUT.csv]"
extra_option() { [ "$1" = --T ] && check_count --T "$2" 1 1048576 && T=$2; }
run() { "$exe" --threads "$threads" --T "$T" --niter "$niter" --warmup 1 --no-naive "$@"; }
all() { run --pass fwd,bwd --mode ordered,redux "$@"; }
sweep() {
  all --tiles auto
  all --tiles manual --qb 64,128 --kb 64,128,256,512,1024 | tail -n +2
  all --tiles auto | tail -n +2
  all --tiles manual --qb 256,512,1024 --kb 64,128,256,512,1024 | tail -n +2
  all --tiles auto | tail -n +2
}
# per pass and mode
cases() { awk -F, 'NR > 1 { print "T " $1 " " $8 " " $9 "," $5 "x" $6 "," $18 "," $10 "," $19 }' "$1"; }
# (the forward's mode is "online": it runs with --mode ordered)
best_points() {
  awk -F, 'NR > 1 && $18 == "manual" { c = $8 " " ($9 == "online" ? "ordered" : $9)
             if (!(c in s) || $10 < s[c]) { s[c] = $10; t[c] = $5 " " $6 } }
           END { for (c in t) print c, t[c] }' "$1" | sort
}
rerun_point() { # pass mode qb kb
  run --pass "$1" --mode "$2" --tiles manual --qb "$3" --kb "$4" | tail -n +2
  run --pass "$1" --mode "$2" --tiles auto | tail -n +2
}
tiles_auto_main "$@"
