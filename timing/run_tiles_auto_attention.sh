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
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 niter=3 rounds=3 T=4096 build=build out=timing/results/tiles_auto_attention.csv
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --niter) niter=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --T) T=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--niter N] [--rounds N] [--T N] [--build DIR] [--out OUT.csv]" >&2; exit 2 ;;
  esac
done
exe=$build/timing/time_attention
[ -x "$exe" ] || { echo "missing $exe (build it first)" >&2; exit 1; }
run() { "$exe" --threads "$threads" --T "$T" --niter "$niter" --warmup 1 --no-naive "$@"; }
all() { run --pass fwd,bwd --mode ordered,redux "$@"; }
{
  all --tiles auto
  all --tiles manual --qb 64,128 --kb 64,128,256,512,1024 | tail -n +2
  all --tiles auto | tail -n +2
  all --tiles manual --qb 256,512,1024 --kb 64,128,256,512,1024 | tail -n +2
  all --tiles auto | tail -n +2
} > "$out"
# per pass and mode: the best manual point, the auto point (the median of
# its runs), their ratio
cases() { awk -F, 'NR > 1 { print "T " $1 " " $8 " " $9 "," $5 "x" $6 "," $18 "," $10 "," $19 }' "$1"; }
cases "$out" | awk -F, -f timing/auto_vs_best.awk
[ "$rounds" -gt 0 ] || exit 0
# the alternating reruns: each pass's best sweep point against auto (the
# forward's mode is "online": it runs with --mode ordered)
rerun=${out%.csv}_rerun.csv
best=$(awk -F, 'NR > 1 && $18 == "manual" { c = $8 " " ($9 == "online" ? "ordered" : $9)
                  if (!(c in s) || $10 < s[c]) { s[c] = $10; t[c] = $5 " " $6 } }
                END { for (c in t) print c, t[c] }' "$out" | sort)
{
  head -1 "$out"
  for _ in $(seq "$rounds"); do
    while read -r pass mode qb kb; do
      run --pass "$pass" --mode "$mode" --tiles manual --qb "$qb" --kb "$kb" | tail -n +2
      run --pass "$pass" --mode "$mode" --tiles auto | tail -n +2
    done <<< "$best"
  done
} > "$rerun"
echo "alternating reruns, $rounds each (medians):"
cases "$rerun" | awk -F, -v rerun=1 -f timing/auto_vs_best.awk
