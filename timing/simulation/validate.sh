#!/usr/bin/env bash
# Does the simulation predict the runs we can make? Runs each case for real
# on this machine (the normal build) and on the simulated platform
# (simulate.sh, the models of this machine), alternating, and prints
# predicted / measured. Run it on the machine the models came from, idle.
#
#   timing/simulation/validate.sh MODELS OUT.csv [BUILD_DIR]
#
# Cases: time_gemm 4096^3 in tiles of 512 (ordered) and tsr_gpt2 124M B4 T64
# (6 steps, the steady median), each on 1 rank of 2 workers and on 2 ranks of
# 1 worker. CSV: case,ranks,workers_per_rank,measured_ms,predicted_ms,ratio
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "validate: error: $*" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: $0 MODELS OUT.csv [BUILD_DIR]"
models=$1 csv=$2 build=${3:-$root/build}
# shellcheck source=../lib/args.sh
PROG=validate . "$root/timing/lib/args.sh"
check_name MODELS "$models"
check_path OUT.csv "$csv"
check_path BUILD_DIR "$build"
[ -e "$csv" ] && die "$csv exists: name a new file"
[ -x "$build/algorithms/gpt2/tsr_gpt2" ] || die "no tsr_gpt2 in $build"
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

gemm_ms() { awk -F, '/^[0-9]/ { printf "%.2f", $11 * 1000 }' <<<"$1"; }
step_ms() { sed -n 's/.*steady state ([0-9]* steps): median step \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
gemm=(--m 4096 --n 4096 --k 4096 --tile 512 --mode ordered --niter 3 --no-baseline)
gpt2=(--model 124M -B 4 -T 64 --steps 6 --val-every 0 --sample-every 0)

measure() {   # program ranks workers -> output of the real run
    local prog=$1 np=$2 w=$3 path
    case $prog in time_gemm) path=$build/timing/time_gemm; args=("${gemm[@]}") ;;
                  tsr_gpt2) path=$build/algorithms/gpt2/tsr_gpt2; args=("${gpt2[@]}") ;; esac
    if [ "$np" = 1 ]; then "$path" --threads "$w" "${args[@]}" 2>&1
    else "${mpirun[@]}" -np "$np" "$path" --threads "$w" "${args[@]}" 2>&1; fi
}
simulate() {  # program ranks workers -> output of the simulated run
    local prog=$1 np=$2 w=$3
    case $prog in time_gemm) args=("${gemm[@]}") ;; tsr_gpt2) args=("${gpt2[@]}") ;; esac
    bash "$here/simulate.sh" --models "$models" --nodes "$np" --workers "$w" "$prog" --threads "$w" "${args[@]}" 2>&1
}

echo "case,ranks,workers_per_rank,measured_ms,predicted_ms,ratio" >"$csv"
for c in "time_gemm 1 2" "time_gemm 2 1" "tsr_gpt2 1 2" "tsr_gpt2 2 1"; do
    set -- $c
    real=$(measure "$@") sim=$(simulate "$@")
    if [ "$1" = time_gemm ]; then m=$(gemm_ms "$real") p=$(gemm_ms "$sim"); else m=$(step_ms "$real") p=$(step_ms "$sim"); fi
    [ -n "$m" ] && [ -n "$p" ] || { echo "$real" "$sim" | tail -n 30 >&2; die "case '$c' gave no time"; }
    echo "$1,$2,$3,$m,$p,$(awk -v p="$p" -v m="$m" 'BEGIN { printf "%.3f", p / m }')" | tee -a "$csv"
done
