#!/usr/bin/env bash
# The GPT-2 training step against its GEMM limit, measured in the same run:
# for each batch shape, rounds alternating
#   tsr_gpt2 (the steady median step of --steps steps) and
#   time_gpt2_gemms (the median of the same step's GEMMs alone, whole
#   matrices through the BLAS's own multi-threaded routine),
# so that the machine's drift hits both sides alike. CSV on stdout:
#   model,B,T,threads,round,step_ms,gemm_ms,step_over_gemm,gemm_share,square_ms,step_over_square
# gemm_share = gemm_ms / step_ms: the step's rate as a share of the GEMM-only
# rate. square_ms: the step's GEMM GFLOP at the BLAS's rate on one large
# square product (the pure-GEMM time); step_over_square = step_ms / square_ms.
# The last line per shape is the median over the rounds.
#   timing/time_gpt2_gemm_limit.sh [--model 124M] [--bt "4:64 16:256"] [--threads N]
#                                  [--rounds 3] [--steps 12] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
model=124M bts="4:64" threads=0 rounds=3 steps=12 build=build
usage="usage: $0 [--model NAME] [--bt \"B:T ...\"] [--threads N] [--rounds N] [--steps N] [--build DIR]"
PROG=time_gpt2_gemm_limit.sh
# shellcheck source=lib/args.sh
. timing/lib/args.sh
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) echo "$usage"; exit 0 ;;
    --model|--bt|--threads|--rounds|--steps|--build) need_value "$1" $# ;;
    *) arg_error "unknown option '$(shown "$1")' ($usage)" ;;
  esac
  case "$1" in
    --model) check_name "$1" "$2"; model=$2 ;;
    --bt) [[ $2 =~ ^[1-9][0-9]{0,5}:[1-9][0-9]{0,5}( [1-9][0-9]{0,5}:[1-9][0-9]{0,5})*$ ]] ||
            arg_error "--bt '$(shown "$2")': B:T pairs of whole numbers, separated by spaces"
          bts=$2 ;;
    --threads) check_count "$1" "$2" 0 4096; threads=$2 ;;
    --rounds) check_count "$1" "$2" 1 1000; rounds=$2 ;;
    --steps) check_count "$1" "$2" 4 100000; steps=$2 ;;
    --build) check_path "$1" "$2"; build=$2 ;;
  esac
  shift 2
done
gpt2=$build/algorithms/gpt2/tsr_gpt2 gemms=$build/timing/time_gpt2_gemms
for exe in "$gpt2" "$gemms"; do [ -x "$exe" ] || { echo "missing $exe (build it first)" >&2; exit 1; }; done
thr=() gthr=(--threads -1)
[ "$threads" -gt 0 ] && thr=(--threads "$threads") gthr=(--threads "$threads")
nthreads=$threads
[ "$threads" -gt 0 ] || nthreads=$(nproc)

echo "model,B,T,threads,round,step_ms,gemm_ms,step_over_gemm,gemm_share,square_ms,step_over_square"
for bt in $bts; do
  B=${bt%%:*} T=${bt##*:}
  rows=""
  for r in $(seq 1 "$rounds"); do
    step=$("$gpt2" --model "$model" -B "$B" -T "$T" "${thr[@]}" --steps "$steps" --val-every 0 --sample-every 0 \
             --quiet 2>&1 | sed -n 's/^summary:.*median step \([0-9.]*\) ms.*/\1/p' || true)
    gemms_csv=$("$gemms" --model "$model" --B "$B" --T "$T" "${gthr[@]}" --steps 5 2>/dev/null || true)
    gemm=$(awk -F, '$5 == "median" { print $9 }' <<<"$gemms_csv")
    square=$(awk -F, '$5 == "square" { print $9 }' <<<"$gemms_csv")
    if [ -z "$step" ] || [ -z "$gemm" ] || [ -z "$square" ]; then
      echo "error: a run failed (B $B T $T round $r)" >&2; exit 1
    fi
    row=$(awk -v s="$step" -v g="$gemm" -v q="$square" \
            'BEGIN { printf "%.1f,%.1f,%.3f,%.3f,%.1f,%.3f", s, g, s / g, g / s, q, s / q }')
    echo "$model,$B,$T,$nthreads,$r,$row"
    rows="$rows$row"$'\n'
  done
  # the median of each column over the rounds
  printf '%s' "$rows" | awk -F, -v pre="$model,$B,$T,$nthreads,median" '
    { for (c = 1; c <= 6; c++) v[c, NR] = $c }
    END { line = pre
          for (c = 1; c <= 6; c++) {
            for (i = 1; i <= NR; i++) a[i] = v[c, i]
            for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
            m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
            line = line "," (c <= 2 || c == 5 ? sprintf("%.1f", m) : sprintf("%.3f", m)) }
          print line }'
done
