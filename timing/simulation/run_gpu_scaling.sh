#!/usr/bin/env bash
# Simulated weak or strong scaling of GPT-2 training (124M by default) over the GPUs of one node and
# over nodes of several GPUs (simulate.sh with the H200 models: each GPU a
# copy of the measured one, joined by a switch of 450 GB/s each way per GPU,
# NVLink and NVSwitch), one sub-batch of B sequences of T tokens a GPU (weak),
# or a global batch of --batch sequences shared by the GPUs (strong).
# Writes CSV rows as they come; each run's output is kept beside OUT.csv as
# OUT.N-nodes-G-gpus.log.
#
#   timing/simulation/run_gpu_scaling.sh [--model NAME] [--gpus LIST] [--nodes LIST] [--B N | --batch N]
#                                        [--T N] [--precision fp32|bf16] [--train FILE] OUT.csv
#   --model: 124M (default), 350M, 774M or 1558M; every task shape a run
#   makes needs an entry in the models: 124M's are measured, 774M's derived
#   (docs/simulation.md, GPT-2 774M), 350M and 1558M have none yet.
#   --gpus: GPUs a node, 1-16, comma-separated (default 1,2,4,8); with
#   --nodes (default 1) every pair is run, one rank a node; the first row
#   (1 node of the first GPU count) is the base of the efficiency.
#   --B (default 8) and --T (default 1024): a GPU's sub-batch. --batch N:
#   strong scaling instead, N sequences in all, N / GPUs a GPU (whole). Nodes are
#   joined by platforms/cluster-gpu-4x400G.xml (4 x 400 Gb/s a node).
#   --train: tsr_gpt2's token file; the bundled tiny Shakespeare (305,260
#   tokens) holds the batch of up to 37 GPUs at B8 T1024, so 8 nodes of 8
#   need a larger one (docs/simulation.md says how to make one).
# CSV (B: a GPU's sequences; efficiency: tokens/ms a GPU against the first
# row's, the same for weak and strong): nodes,gpus_per_node,gpus,B,T,precision,step_ms,tokens_per_ms,
# tokens_per_ms_per_gpu,efficiency,gpu_gpu_copies,gpu_gpu_mb,simulation_s
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PROG=run_gpu_scaling
# shellcheck source=../lib/args.sh
. "$here/../lib/args.sh"
usage="usage: $0 [--model NAME] [--gpus LIST] [--nodes LIST] [--B N | --batch N] [--T N] [--precision fp32|bf16] [--train FILE] OUT.csv"
model=124M gpus_list="1,2,4,8" nodes_list=1 B=8 B_given="" batch=0 T=1024 precision=fp32 train=()
show_help() { echo "$usage"; }
option() {
    case $1 in
        --model) check_word --model "$2" 124M 350M 774M 1558M; model=$2 ;;
        --gpus) check_list --gpus "$2" check_count 1 16; gpus_list=$2 ;;
        --nodes) check_list --nodes "$2" check_count 1 64; nodes_list=$2 ;;
        --B) check_count --B "$2" 1 1024; B=$2 B_given=1 ;;
        --batch) check_count --batch "$2" 1 65536; batch=$2 ;;
        --T) check_count --T "$2" 1 1024; T=$2 ;;
        --precision) check_word --precision "$2" fp32 bf16; precision=$2 ;;
        --train) check_path --train "$2"; [ -f "$2" ] || arg_error "--train: no file '$(shown "$2")'"; train=(--train "$2") ;;
    esac
}
take_options_and_csv option show_help "$usage" "--model --gpus --nodes --B --batch --T --precision --train" "$@"

[ "$batch" -eq 0 ] || [ -z "$B_given" ] || arg_error "--B (weak) and --batch (strong): give one"
IFS=, read -r -a node_counts <<<"$nodes_list"
IFS=, read -r -a gpu_counts <<<"$gpus_list"
for n in "${node_counts[@]}"; do
    for g in "${gpu_counts[@]}"; do
        [ "$batch" -eq 0 ] || [ $((batch % (n * g))) -eq 0 ] ||
            arg_error "--batch $batch does not share out evenly over $n node(s) x $g GPU(s)"
    done
done
echo "nodes,gpus_per_node,gpus,B,T,precision,step_ms,tokens_per_ms,tokens_per_ms_per_gpu,efficiency,gpu_gpu_copies,gpu_gpu_mb,simulation_s" >"$csv"
base=""
for n in "${node_counts[@]}"; do
    for g in "${gpu_counts[@]}"; do
        gpus=$((n * g)) log=${csv%.csv}.$n-nodes-$g-gpus.log
        [ "$batch" -eq 0 ] || B=$((batch / gpus))
        link=()
        [ "$g" -gt 1 ] && link=(--gpu-link 450)
        start=$(date +%s)
        bash "$here/simulate.sh" --models h200-gpu --platform "$here/platforms/cluster-gpu-4x400G.xml" --nodes "$n" --workers 0 --gpus "$g" "${link[@]}" \
            tsr_gpt2 --model "$model" -B $((B * gpus)) -T "$T" --sub-batches "$gpus" --precision "$precision" \
            --steps 6 --val-every 0 --sample-every 0 --profile "${train[@]}" >"$log" 2>&1 ||
            { echo "run_gpu_scaling: the run of $n node(s) x $g GPU(s) failed: $log" >&2; exit 1; }
        secs=$(($(date +%s) - start))
        step=$(sed -n 's/.*steady state ([0-9]* steps): median step \([0-9.]*\) ms.*/\1/p' "$log")
        [ -n "$step" ] || { echo "run_gpu_scaling: no steady step in $log" >&2; exit 1; }
        read -r copies mb < <(sed -n "s/.*steady steps' GPU <-> GPU copies: \([0-9.]*\) copies, \([0-9.]*\) MB.*/\1 \2/p" "$log" | head -1) || true
        row=$(awk -v s="$step" -v g="$gpus" -v b="$base" -v tok=$((B * T)) 'BEGIN {
            t = tok * g / s; per = t / g
            printf "%.1f,%.2f,%.2f,%.3f", s, t, per, b == "" ? 1 : per / b }')
        [ -n "$base" ] || base=$(cut -d, -f3 <<<"$row")
        echo "$n,$g,$gpus,$B,$T,$precision,$row,${copies:-0},${mb:-0},$secs" | tee -a "$csv"
    done
done
