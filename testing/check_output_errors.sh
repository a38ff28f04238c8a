#!/bin/bash
# A driver whose output cannot be written (> /dev/full) exits non-zero with
# "cannot write the output" on stderr, instead of exit 0 with the CSV lost.
# usage: check_output_errors.sh TESTING_GEMM TIME_GEMM TIME_ATTENTION TIME_FUSION TIME_BLAS_COLD TIME_GPT2_GEMMS
set -u
testing_gemm=$1 time_gemm=$2 time_attention=$3 time_fusion=$4 time_blas_cold=$5 time_gpt2_gemms=$6
failed=0

# expect_write_error PROG ARGS...: the smallest run of PROG, its stdout on /dev/full
expect_write_error() {
    local err rc
    err=$("$@" 2>&1 >/dev/full)
    rc=$?
    if [ $rc -eq 0 ] || [[ $err != *"cannot write the output"* ]]; then
        echo "FAIL: $(basename "$1") ${*:2} > /dev/full: exit $rc; stderr: $err"
        failed=1
    fi
}

expect_write_error "$testing_gemm" --m 8 --n 8 --k 8 --mb 8 --nb 8 --kb 8 --threads 1 --check
expect_write_error "$time_gemm" --m 64 --n 64 --k 64 --tile 32 --mode ordered --niter 1 --warmup 0 --threads 1 \
    --no-baseline
expect_write_error "$time_gemm" --help
expect_write_error "$time_attention" --T 64 --hd 16 --heads 1 --qb 64 --pass fwd --niter 1 --warmup 0 --threads 1 \
    --no-naive
expect_write_error "$time_fusion" --op gelu --C 64 --BT 64 --tile 64 --niter 1 --warmup 0 --threads 1
expect_write_error "$time_blas_cold" --m 16 --n 16 --k 16 --sets 2 --reps 2
expect_write_error "$time_gpt2_gemms" --model micro --B 1 --T 8 --steps 1 --threads 1

[ $failed -eq 0 ] && echo PASS
exit $failed
