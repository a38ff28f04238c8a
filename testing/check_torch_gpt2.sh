#!/usr/bin/env bash
# timing/torch_gpt2.py (the PyTorch side of the GPU node's comparison) trains
# the same model as tsr_gpt2: from one initial llm.c checkpoint, on the same
# batches in order, on CPUs,
#  1. fp32: every loss of 6 steps of d2 B4 T64 at --lr 1e-3 within 1e-5 of
#     tsr_gpt2's (2e-6 seen; the exact GELU in place of llm.c's tanh one
#     gives 2.8e-5: the forward, the backward and AdamW all enter by step 1);
#  2. bf16 (autocast), 4 steps: within 2e-2, the bf16 bar of check_gpt2_bf16.sh;
#  3. a file that is not a checkpoint: a clear message, a non-zero exit.
# Exits 77 (CTest: skipped) when no python3 here has torch (Debian's
# python3-torch; .ci/install-deps installs it).
# usage: check_torch_gpt2.sh TSR_GPT2 TORCH_GPT2_PY WORKDIR
set -u
exe=$1; script=$2; work=$3
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
py=""
for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch" >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || { echo "skipped: no python3 with torch"; exit 77; }
check_start "$work"
cd "$work" || exit 1
tessera() { "$exe" --threads 2 --val-every 0 --sample-every 0 --no-shuffle "$@"; }
losses() { sed -n 's/^step [0-9]*: train loss \([0-9.]*\).*/\1/p' | tr '\n' ' '; }

# compare NAME STEPS BOUND TESSERA_LOSSES TORCH_LOSSES
compare() {
    echo "$1: tsr_gpt2 [$4]"
    echo "$1: torch    [$5]"
    if awk -v steps="$2" -v b="$3" -v a="$4" -v t="$5" 'BEGIN {
            if (split(a, x, " ") != steps || split(t, y, " ") != steps) exit 1
            for (i = 1; i <= steps; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > b) exit 1 }
        }'; then ok; else bad "$1: the losses differ by more than $3 (or a run did not give $2)"; fi
}

tessera --model d2 -T 64 --steps 0 --write-checkpoint init.bin >init.log 2>&1 ||
    bad "tsr_gpt2 did not write the initial checkpoint: $(tail -2 init.log)"
# both runs of a precision: STEPS, then the options they share
both() {
    local name=$1 steps=$2 bound=$3 t p
    shift 3
    t=$(tessera --load init.bin -B 4 -T 64 --steps "$steps" "$@" 2>&1 | losses)
    p=$("$py" "$script" --load init.bin -B 4 -T 64 --steps "$steps" --device cpu "$@" 2>&1 | losses)
    compare "$name" "$steps" "$bound" "$t" "$p"
}
both fp32 6 1e-5 --lr 1e-3
both bf16 4 2e-2 --precision bf16

"$py" "$script" --load "$exe" --device cpu >bad.log 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "not an llm.c float32 checkpoint" bad.log && ! grep -q Traceback bad.log; then ok; else
    bad "a program given as the checkpoint: rc $rc, $(head -c 300 bad.log)"
fi
check_report torch_gpt2
