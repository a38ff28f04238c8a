#!/usr/bin/env bash
# The simulation's test (CTest 'simulation'): builds what simulate.sh needs
# (cached), then asserts that
#  1. one simulated node of 2 workers predicts the 124M B4 T64 step that the
#     models' calibration run measured (machine.txt) within 15 %;
#  2. two simulated nodes run the sharded trainer: 2 ranks, and rank 0 holds
#     about half the parameter + AdamW bytes of one node (0.4-0.6x);
#  3. one simulated H200 node, its GPU alone (simulated CUDA worker, models
#     measured on the device), predicts the measured 124M B8 T1024 step
#     within 15 %.
# With the argument 2gpu instead (CTest 'simulation_2gpu'): GPT-2 124M B8
# T1024 a GPU (issue 42's weak-scaling shape) on one simulated node of two
# H200s (copies of the measured one joined at 450 GB/s: replicate_gpu.sh),
# the GPUs alone, one sub-batch each; asserts 0 CPU + 2 CUDA workers and 2
# sub-batches, sub-batch 0 on GPU 0 and 1 on GPU 1 (the runtime line), tasks
# on both GPUs, no copies between host and GPUs in the steady steps (the
# state stays on the GPUs), at most two copies between the GPUs a tensor and
# step (its parameters out of its home GPU, the other GPU's partial gradient
# in: 2 x 148) and the other sub-batch's embedding input out and its
# gradient in (the embedding's tasks run on its GPU: gpt2_model.c,
# tsr_gpt2_wte_summed_early), and a weak-scaling efficiency of at least
# 0.90 against one GPU with B8 (0.82 when the transfers inside a node took
# SMPI's MPI factors: node_bus_factors.cpp; docs/simulation.md "Several GPUs
# a node"). Then two simulated nodes of one H200 (4 x 400 Gb/s, one rank
# each, B8 a rank): the default tiles cut the vocabulary in two tiles a rank
# (12576: the derived model entries, perfmodels/h200-gpu/machine.txt, must
# cover them) and the weak efficiency against one GPU is at least 0.77
# (0.781; 0.763 with the whole vocabulary in one tile).
# Exits 77 (CTest: skipped) when SimGrid's tools are not installed.
#
#   timing/simulation/check.sh [BUILD_DIR [2gpu]]   (the simulation build; default build-sim)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "simulation check: FAILED: $*" >&2; exit 1; }

for tool in smpicc smpirun xsltproc; do
    command -v "$tool" >/dev/null || { echo "simulation check: skipped: '$tool' is missing (libsimgrid-dev, xsltproc)"; exit 77; }
done
# check_prediction WHAT MODELS CASE OUTPUT: the simulated run's steady median
# step (OUTPUT) is within 15 % of the one measured where the models came from
# (their machine.txt: "Measured: CASE, median step X ms")
check_prediction() {
    local what=$1 models=$2 case=$3 out=$4 measured predicted
    measured=$(sed -n "s/^Measured: $case, median step \([0-9.]*\) ms.*/\1/p" "$here/perfmodels/$models/machine.txt")
    [ -n "$measured" ] || fail "perfmodels/$models/machine.txt has no 'Measured: $case' line"
    predicted=$(steady "$out")
    [ -n "$predicted" ] || fail "no steady-state step time in the output of $what: $out"
    echo "$what: predicted $predicted ms, measured $measured ms"
    awk -v p="$predicted" -v m="$measured" 'BEGIN { r = p / m; exit !(r > 0.85 && r < 1.15) }' ||
        fail "$what: prediction $predicted ms is not within 15 % of $measured ms"
}

build=(--build "${1:-$here/../../build-sim}")
# steady SIMULATE_OUTPUT: the predicted steady median step in ms
steady() { sed -n 's/.*steady state ([0-9]* steps): median step \([0-9.]*\) ms.*/\1/p' <<<"$1"; }

# weak_at_least WHAT STEP BASE MIN: WHAT's step (ms) keeps at least MIN of
# the BASE step's rate (one GPU's)
weak_at_least() {
    echo "124M T1024: $1 $2 ms: weak efficiency $(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.3f", b / a }')"
    awk -v a="$2" -v b="$3" -v m="$4" 'BEGIN { exit !(b / a >= m) }' ||
        fail "the $1 step ($2 ms) is below $4 weak efficiency against the 1-GPU step ($3 ms)"
}

check_two_gpus() {
    local run=(tsr_gpt2 --model 124M -T 1024 --steps 6 --val-every 0 --sample-every 0 --profile)
    local two one two_nodes two_by_two gpu tasks copies between s1 s2
    two=$(bash "$here/simulate.sh" "${build[@]}" --models h200-gpu --workers 0 --gpus 2 --gpu-link 450 "${run[@]}" -B 16 2>&1) ||
        fail "the 2-GPU run failed: $(tail -5 <<<"$two")"
    grep -q ' 0 CPU + 2 CUDA workers' <<<"$two" || fail "not 0 CPU + 2 CUDA workers: $(grep -m1 runtime: <<<"$two")"
    grep -q '; 2 sub-batch(es)' <<<"$two" || fail "not one sub-batch a GPU: $(grep -m1 model: <<<"$two")"
    grep -q '^runtime: .*; sub-batch 0 on GPU 0, 1 on GPU 1$' <<<"$two" ||
        fail "the runtime line does not place sub-batch 0 on GPU 0 and 1 on GPU 1: $(grep -m1 runtime: <<<"$two")"
    for gpu in 0 1; do
        tasks=$(awk -v g="CUDA $gpu.0" 'index($0, "  " g " ") == 1 { print $(NF - 3) }' <<<"$two")
        [ "${tasks:-0}" -gt 0 ] || fail "simulated GPU $gpu ran no task: $(grep -m1 "CUDA $gpu" <<<"$two")"
        echo "GPU $gpu: $tasks tasks"
    done
    copies=$(sed -n "s/.*steady steps' host <-> GPU copies: \([0-9.]*\) MB host to GPU, \([0-9.]*\) MB GPU to host.*/\1 \2/p" <<<"$two")
    [ -n "$copies" ] || fail "no host <-> GPU line in the --profile output"
    awk -v c="$copies" 'BEGIN { split(c, v, " "); exit !(v[1] + v[2] < 1) }' ||
        fail "the steady steps copy $copies MB a step between host and GPUs (under 1 MB expected)"
    between=$(sed -n "s/.*steady steps' GPU <-> GPU copies: \([0-9.]*\) copies.*/\1/p" <<<"$two")
    [ -n "$between" ] || fail "no GPU <-> GPU line in the --profile output"
    echo "GPU <-> GPU copies a steady step: $between"
    awk -v c="$between" 'BEGIN { exit !(c > 0 && c <= 2 * 148 + 2) }' ||
        fail "$between copies a step between the GPUs (1 to 298 expected: a tensor's parameters out, its partial gradient in; the embedding's input out, its gradient in)"
    one=$(bash "$here/simulate.sh" "${build[@]}" --models h200-gpu --workers 0 --gpus 1 "${run[@]}" -B 8 2>&1) ||
        fail "the 1-GPU run failed: $(tail -5 <<<"$one")"
    s2=$(steady "$two") s1=$(steady "$one")
    [ -n "$s1" ] && [ -n "$s2" ] || fail "no steady-state step time in the output"
    echo "124M T1024: 1 GPU (B8) $s1 ms a step"
    weak_at_least "2-GPU (B16, B8 each)" "$s2" "$s1" 0.90
    two_nodes=$(bash "$here/simulate.sh" "${build[@]}" --models h200-gpu --platform "$here/platforms/cluster-gpu-4x400G.xml" \
        --nodes 2 --workers 0 --gpus 1 "${run[@]}" -B 16 2>&1) || fail "the 2-node run failed: $(tail -5 <<<"$two_nodes")"
    grep -q '^model: .* tiles tok 8192 ch 768 hid 3072 voc 12576 ' <<<"$two_nodes" ||
        fail "2 ranks with GPUs do not default to two vocabulary tiles a rank: $(grep -m1 model: <<<"$two_nodes")"
    s2=$(steady "$two_nodes")
    [ -n "$s2" ] || fail "no steady-state step time in the 2-node output"
    weak_at_least "2-node (1 GPU, B8 each)" "$s2" "$s1" 0.77
    # two GPUs a rank share its samples: the token tile is one GPU's sub-batch
    # (4 sequences), not the rank's 8
    two_by_two=$(bash "$here/simulate.sh" "${build[@]}" --models h200-gpu --platform "$here/platforms/cluster-gpu-4x400G.xml" \
        --nodes 2 --workers 0 --gpus 2 --gpu-link 450 "${run[@]}" -B 16 2>&1) ||
        fail "the 2-node run of 2 GPUs each failed: $(tail -5 <<<"$two_by_two")"
    grep -q '^model: .* tiles tok 4096 ch 768 hid 3072 voc 12576 .*; 4 sub-batch(es)' <<<"$two_by_two" ||
        fail "2 ranks of 2 GPUs, B16: the token tile is not a GPU's sub-batch of 4096 tokens: $(grep -m1 model: <<<"$two_by_two")"
    echo "2 nodes x 2 GPUs, B16: $(grep -o 'median step [0-9.]* ms' <<<"$two_by_two")"
    echo "simulation check (2 GPUs): passed"
}
case ${2:-} in
    '') ;;
    2gpu) check_two_gpus; exit 0 ;;
    *) fail "unknown part '${2}' (2gpu, or none)" ;;
esac

models=epyc-avx512-2c
gpt2=(tsr_gpt2 --model 124M -B 4 -T 64 --steps 6 --val-every 0 --sample-every 0 --profile)
out=$(bash "$here/simulate.sh" "${build[@]}" --models "$models" --nodes 1 --workers 2 "${gpt2[@]}")
check_prediction "1 node x 2 workers" "$models" "124M B4 T64, 2 workers" "$out"
state_of_rank0() { awk '/^rank 0 holds / { print $4 + $8 }' <<<"$1"; }   # parameters + AdamW MB
state1=$(state_of_rank0 "$out")

out=$(bash "$here/simulate.sh" "${build[@]}" --models "$models" --nodes 2 --workers 2 "${gpt2[@]}")
grep -q ' 2 rank(s)' <<<"$out" || fail "the 2-node run did not start 2 ranks: $out"
state2=$(state_of_rank0 "$out")
[ -n "$state1" ] && [ -n "$state2" ] || fail "no 'rank 0 holds' line in the --profile output"
echo "rank 0's parameters + AdamW state: $state1 MB on 1 node, $state2 MB on 2 nodes"
awk -v a="$state2" -v b="$state1" 'BEGIN { r = a / b; exit !(r > 0.4 && r < 0.6) }' ||
    fail "2 nodes: rank 0 holds $state2 MB, not about half of $state1 MB"

out=$(bash "$here/simulate.sh" "${build[@]}" --models h200-gpu --nodes 1 --workers 0 --gpus 1 \
    tsr_gpt2 --model 124M -B 8 -T 1024 --steps 5 --val-every 0 --sample-every 0)
grep -q ' 0 CPU + 1 CUDA workers' <<<"$out" || fail "the GPU node did not run one simulated CUDA worker: $out"
check_prediction "1 H200 node, GPU alone" h200-gpu "124M B8 T1024, GPU alone" "$out"
echo "simulation check: passed"
