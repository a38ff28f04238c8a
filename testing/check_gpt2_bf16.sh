#!/usr/bin/env bash
# tsr_gpt2 --precision bf16 against the float32 run, on CPU workers (the op
# kit's bf16 path: bf16 tiles, float32 arithmetic on converted copies):
#  1. d2, B4 T64, 20 steps: every bf16 loss within 2e-2 (absolute, as llm.c's
#     test_gpt2.cu compares losses) of the float32 loss of the same step, and
#     not all of them equal to it (bf16 rounding took place);
#  2. with REDUX sums and two sub-batches (bf16 reduction methods, bf16
#     gradient sums), 5 steps, the same bound;
#  3. --save / --resume in bf16 continues with the identical losses, and the
#     llm.c checkpoint (float32 master weights) has the float32 run's size;
#  4. a bad --precision: a clear message, a non-zero exit.
# With a LAUNCHER (mpirun ... -np 2) instead, the traffic between the ranks:
#  5. d2, B2 T16: the bytes each rank sends a step (StarPU-MPI's count,
#     STARPU_COMM_STATS, the whole run of 3 steps less that of 2) are half
#     the float32 run's, within 1%, and the losses within 2e-2 of its losses.
# usage: check_gpt2_bf16.sh TSR_GPT2 WORKDIR [LAUNCHER...]
set -u
exe=$1; work=$2
launch=("${@:3}")
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_start "$work"
run() { "$exe" --threads 2 --val-every 0 --sample-every 0 --quiet "$@"; }
losses() { tail -n +2 "$1" | cut -d, -f2 | tr '\n' ' '; }

# compare NAME FP32_CSV BF16_CSV: prints the pairs, checks the bound
compare() {
    local name=$1 f=$(losses "$2") b=$(losses "$3")
    echo "$name: fp32 [$f]"
    echo "$name: bf16 [$b]"
    if awk -v f="$f" -v b="$b" 'BEGIN { n = split(f, x, " "); m = split(b, y, " "); if (n != m || n == 0) exit 1;
          worst = 0; differ = 0
          for (i = 1; i <= n; i++) { d = y[i] - x[i]; if (d < 0) d = -d; if (d > worst) worst = d; if (d > 1e-6) differ++ }
          printf "  worst |bf16 - fp32| %.6f over %d steps, %d differ\n", worst, n, differ
          exit !(worst <= 2e-2 && differ > 0) }'; then ok
    else bad "$name: bf16 losses not within 2e-2 of fp32, or all equal to them"; fi
}

# sent LOG: the bytes each rank sent over its run, in rank order
sent() { sed -n 's/^\[starpu_comm_stats\]\[\([0-9]*\):[0-9]*\][[:space:]]*\([0-9.]*\) B.*/\1 \2/p' "$1" | sort -n | cut -d' ' -f2 | tr '\n' ' '; }

if [ ${#launch[@]} -gt 0 ]; then
    for p in fp32 bf16; do
        for n in 2 3; do
            STARPU_COMM_STATS=1 "${launch[@]}" "$exe" --threads 1 --val-every 0 --sample-every 0 --quiet -B 2 -T 16 \
                --precision "$p" --steps "$n" --csv "$work/mpi_${p}_$n.csv" > "$work/mpi_${p}_$n.log" 2>&1 ||
                bad "$p, $n steps on 2 ranks exited $?"
        done
    done
    compare "d2 B2 T16, 2 ranks" "$work/mpi_fp32_3.csv" "$work/mpi_bf16_3.csv"
    if awk -v f2="$(sent "$work/mpi_fp32_2.log")" -v f3="$(sent "$work/mpi_fp32_3.log")" \
           -v b2="$(sent "$work/mpi_bf16_2.log")" -v b3="$(sent "$work/mpi_bf16_3.log")" \
        'BEGIN { n = split(f2, x2, " "); split(f3, x3, " "); split(b2, y2, " "); split(b3, y3, " ")
          if (n != 2) exit 1
          for (r = 1; r <= n; r++) { f = x3[r] - x2[r]; b = y3[r] - y2[r]
            printf "  rank %d sends a step: fp32 %.0f B, bf16 %.0f B (ratio %.4f)\n", r - 1, f, b, (f > 0 ? b / f : 0)
            if (!(f > 0 && b > 0 && (2 * b - f) / f <= 0.01 && (f - 2 * b) / f <= 0.01)) bad = 1 }
          exit bad }'; then ok
    else bad "the bf16 run does not send half the float32 run's bytes a step (or no counts: STARPU_COMM_STATS)"; fi
    check_report check_gpt2_bf16_mpi
    exit
fi

run --steps 20 --csv "$work/fp32.csv" > "$work/fp32.log" 2>&1 || bad "fp32 run exited $?"
run --steps 20 --precision bf16 --csv "$work/bf16.csv" > "$work/bf16.log" 2>&1 || bad "bf16 run exited $?"
grep -q "^precision: bf16" "$work/bf16.log" && ok || bad "the bf16 run does not say its precision"
compare "d2 B4 T64" "$work/fp32.csv" "$work/bf16.csv"

run --steps 5 --precision bf16 --redux --sub-batches 2 --csv "$work/bf16_redux.csv" > "$work/bf16_redux.log" 2>&1 ||
    bad "bf16 --redux --sub-batches 2 exited $?"
head -6 "$work/fp32.csv" > "$work/fp32_5.csv"
compare "d2 REDUX, 2 sub-batches" "$work/fp32_5.csv" "$work/bf16_redux.csv"

run --steps 3 --precision bf16 --save "$work/state.bin" --write-checkpoint "$work/bf16_ckpt.bin" > /dev/null 2>&1 ||
    bad "bf16 save exited $?"
run --steps 5 --precision bf16 --resume "$work/state.bin" --csv "$work/resumed.csv" > /dev/null 2>&1 ||
    bad "bf16 resume exited $?"
a=$(sed -n 5,6p "$work/bf16.csv" | cut -d, -f1,2); b=$(tail -n +2 "$work/resumed.csv" | cut -d, -f1,2)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "bf16 resumed trajectory [$b] differs from [$a]"
run --steps 0 --write-checkpoint "$work/fp32_ckpt.bin" > /dev/null 2>&1
[ -s "$work/bf16_ckpt.bin" ] && [ "$(stat -c %s "$work/bf16_ckpt.bin")" = "$(stat -c %s "$work/fp32_ckpt.bin")" ] && ok ||
    bad "the bf16 run's checkpoint is not a float32 checkpoint of the model's size"

"$exe" --precision fp16 --steps 1 > "$work/badp.log" 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "precision fp16" "$work/badp.log" && ok ||
    bad "--precision fp16: exit $rc, $(cat "$work/badp.log")"

check_report check_gpt2_bf16
