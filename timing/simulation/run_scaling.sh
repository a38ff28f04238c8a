#!/usr/bin/env bash
# Simulated scaling of GPT-2 124M training over 1-64 nodes of 16 CPU workers
# (simulate.sh; models calibrated on one machine, 100 Gb/s network), with the
# training state sharded over the ranks (the default) and on rank 0
# (--state-on-rank0). Writes CSV rows as they come and, at the end, OUT.png:
# the efficiency against 1 node, beside the study's measured weak scaling
# (StarPU-MPI port of llm.c: 2.32 -> 1.88 tokens/ms per node from 1 to 16
# nodes of 32 cores, T 64).
#
#   timing/simulation/run_scaling.sh [--models NAME] [--nodes LIST] [--only SCENARIO]
#                                    [--placements LIST] [--steps N] [--submit-cost US[,SKIP]] OUT.csv
#   --nodes: node counts 1-64, comma-separated (default 1,2,4,8,16,32,64);
#   --placements: sharded,rank0 (the default) or either; --steps 1-99;
#   --only: one of the scenarios below, by its exact name;
#   --submit-cost: the submitting thread's cost charged a task (simulate.sh;
#   default its reference 13.7,3.8 us; 0: not charged)
#
# Scenarios (tokens a step on N nodes):
#   weak-T256    B 16N, T 256  (16 sequences per node)
#   weak-T1024   B 4N,  T 1024 (4 sequences per node)
#   strong-T256  B 64,  T 256  (N <= 64)
#   strong-T1024 B 16,  T 1024 (N <= 16)
# Tiles fixed for every run (tok 256, ch 384, hid 1536, voc 6288, 6 heads,
# q = k = 256): the models hold those shapes. 4 steps, the median of the 2
# steady ones (a simulated rank costs ~1 GB and ~8 s a step here). --steps 1
# or 2 (no steady step: tsr_gpt2 counts only a step between two others)
# reads the whole run instead: step_ms is its time over N, filling and
# draining included, so compare such rows only with rows of the same N. CSV: scenario,placement,nodes,workers_per_node,B,T,step_ms,
# tokens_per_ms,tokens_per_ms_per_node,efficiency,rank0_state_mb,simulation_s
# Each run's output (its --profile: every rank's schedule; without StarPU-MPI's
# one line a rank about MPI threads) is kept beside OUT.csv, as
# OUT.SCENARIO-PLACEMENT-NODES.log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PROG=run_scaling
# shellcheck source=../lib/args.sh
. "$root/timing/lib/args.sh"
usage="usage: $0 [--models NAME] [--nodes LIST] [--only SCENARIO] [--placements LIST] [--steps N] [--submit-cost US[,SKIP]] OUT.csv"
scenarios=(weak-T256 weak-T1024 strong-T256 strong-T1024)

models=epyc-avx512-2c nodes_list="1,2,4,8,16,32,64" only="" placements="sharded,rank0" workers=16 steps=4 submit_cost=()
show_help() { echo "$usage"; }
option() {
    case $1 in
        --models) check_name --models "$2"; models=$2 ;;
        --nodes) check_list --nodes "$2" check_count 1 64; nodes_list=$2 ;;
        --only) check_word --only "$2" "${scenarios[@]}"; only=$2 ;;
        --placements) check_list --placements "$2" check_word sharded rank0; placements=$2 ;;
        --steps) check_count --steps "$2" 1 99; steps=$2 ;;
        --submit-cost) submit_cost=(--submit-cost "$2") ;; # checked by simulate.sh
    esac
}
take_options_and_csv option show_help "$usage" "--models --nodes --only --placements --steps --submit-cost" "$@"
# the validation file holds 32768 tokens, less than one batch of 128 x 256: the
# training file stands in for it (no validation runs)
train=$root/algorithms/gpt2/data/tiny_shakespeare_train.bin
tiles=(--tile-tok 256 --tile-ch 384 --tile-hid 1536 --tile-voc 6288 --tile-heads 6 --tile-q 256 --tile-k 256)
echo "scenario,placement,nodes,workers_per_node,B,T,step_ms,tokens_per_ms,tokens_per_ms_per_node,efficiency,rank0_state_mb,simulation_s" >"$csv"

declare -A base   # tokens/ms per node on the first node count, per scenario and placement
run_point() {     # scenario placement nodes B T
    local scenario=$1 placement=$2 n=$3 B=$4 T=$5 extra=() out start step tpm per_node eff state rc=0
    local log=${csv%.csv}.$scenario-$placement-$n.log
    [ "$placement" = rank0 ] && extra=(--state-on-rank0)
    start=$(date +%s.%N)
    out=$(bash "$here/simulate.sh" --models "$models" --nodes "$n" --workers "$workers" "${submit_cost[@]}" tsr_gpt2 --model 124M \
          -B "$B" -T "$T" --steps "$steps" "${tiles[@]}" --val-every 0 --sample-every 0 --profile "${extra[@]}" \
          --val "$train" 2>&1) || rc=$?
    grep -v "MPI_Init_thread level" <<<"$out" >"$log" || true
    [ "$rc" = 0 ] || arg_error "$scenario $placement on $n nodes failed (output: $log)"
    if [ "$steps" -ge 3 ]; then
        step=$(sed -n 's/.*steady state ([0-9]* steps): median step \([0-9.]*\) ms.*/\1/p' <<<"$out")
    else
        step=$(sed -n 's/^summary: [0-9]* steps in \([0-9.]*\) ms.*/\1/p' <<<"$out" |
               awk -v n="$steps" 'NF { printf "%.1f", $1 / n }')
    fi
    [ -n "$step" ] || arg_error "no step time for $scenario $placement on $n nodes (output: $log)"
    state=$(awk '/^rank 0 holds / { print $4 + $8 }' <<<"$out")
    tpm=$(awk -v b="$B" -v t="$T" -v s="$step" 'BEGIN { printf "%.4f", b * t / s }')
    per_node=$(awk -v x="$tpm" -v n="$n" 'BEGIN { printf "%.4f", x / n }')
    local key=$scenario/$placement
    [ -n "${base[$key]:-}" ] || base[$key]=$per_node
    eff=$(awk -v x="$per_node" -v b="${base[$key]}" 'BEGIN { printf "%.3f", x / b }')
    echo "$scenario,$placement,$n,$workers,$B,$T,$step,$tpm,$per_node,$eff,${state:-nan},$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')" |
        tee -a "$csv"
}

IFS=, read -r -a placements <<<"$placements"
IFS=, read -r -a nodes_list <<<"$nodes_list"
for scenario in "${scenarios[@]}"; do
    [ -z "$only" ] || [ "$only" = "$scenario" ] || continue
    for placement in "${placements[@]}"; do
        for n in "${nodes_list[@]}"; do
            case $scenario in
                weak-T256) run_point "$scenario" "$placement" "$n" $((16 * n)) 256 ;;
                weak-T1024) run_point "$scenario" "$placement" "$n" $((4 * n)) 1024 ;;
                strong-T256) [ "$n" -gt 64 ] || run_point "$scenario" "$placement" "$n" 64 256 ;;
                strong-T1024) [ "$n" -gt 16 ] || run_point "$scenario" "$placement" "$n" 16 1024 ;;
            esac
        done
    done
done

# the picture: this run's efficiencies and the study's two measured points
plot_in=$(mktemp "${TMPDIR:-/tmp}/tsr-scaling.XXXXXX")
trap 'rm -f "$plot_in"' EXIT
{ cat "$csv"
  echo "study weak T64 (measured),StarPU-MPI 32 cores/node,1,32,nan,64,nan,nan,2.32,1.000,nan,nan"
  echo "study weak T64 (measured),StarPU-MPI 32 cores/node,16,32,nan,64,nan,nan,1.88,0.810,nan,nan"; } >"$plot_in"
sh "$root/timing/plot_csv.sh" "$plot_in" "${csv%.csv}.png" nodes efficiency scenario,placement
