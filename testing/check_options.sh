#!/bin/bash
# Hostile command-line values in the programs that share testing/tsr_params.c:
# integers that do not fit an int (they used to wrap: --m 4294967360 ran
# m = 64), trailing or leading characters, empty list items and reals that
# are not finite numbers exit 2 with a message naming the option and the
# value; lists and ranges still parse.
# usage: check_options.sh TESTING_GEMM TIME_GEMM TIME_ATTENTION TIME_FUSION TIME_BLAS_COLD TIME_GPT2_GEMMS
set -u
testing_gemm=$1 time_gemm=$2 time_attention=$3 time_fusion=$4 time_blas_cold=$5 time_gpt2_gemms=$6
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# expect_bad PROG OPTION VALUE: exit 2, stderr names --OPTION and VALUE, nothing run
expect_bad() {
    local prog=$1 opt=$2 value=$3 err rc
    err=$("$prog" "--$opt" "$value" --help 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq 2 ] || { fail "$(basename "$prog") --$opt '$value': exit $rc, not 2"; return; }
    [[ $err == *"--$opt"* && $err == *"'$value'"* ]] ||
        fail "$(basename "$prog") --$opt '$value': the message does not name the option and the value: $err"
}

# expect_good PROG ARGS...: parsed (--help runs nothing and exits 0)
expect_good() {
    "$@" --help >/dev/null 2>&1 || fail "$(basename "$1") ${*:2}: refused"
}

bad_ints=(4294967360 1099511627776 -4294967296 9223372036854775808 64x " 64" "+64" "" 6.4e1 0x40 "64,,128" "64,"
          "1:4294967360:1")
for v in "${bad_ints[@]}"; do
    expect_bad "$time_gemm" m "$v"
    expect_bad "$time_gemm" tile "$v"
    expect_bad "$testing_gemm" m "$v"
done
for v in 4294967360 12x; do
    expect_bad "$time_gemm" niter "$v"
    expect_bad "$testing_gemm" mb "$v"
    expect_bad "$time_attention" T "$v"
    expect_bad "$time_fusion" C "$v"
    expect_bad "$time_blas_cold" k "$v"
    expect_bad "$time_gpt2_gemms" B "$v"
done
for v in abc 1.5x "" " 1" inf -inf nan 1e999 0x; do
    expect_bad "$testing_gemm" alpha "$v"
    expect_bad "$testing_gemm" beta "$v"
done
# values below an option's minimum are refused before anything runs
for opt in m n k mb nb kb batch bb P; do
    expect_bad "$testing_gemm" "$opt" 0
done

expect_good "$testing_gemm" --m 67,200 --k 1:45:11 --alpha 0,1,-2.5,1e-3 --beta 0.5 --threads -1
expect_good "$time_gemm" --m 2147483647 --tile 64,128:512:128 --threads -1,1
expect_good "$time_fusion" --BT 64,128 --T 0

[ $failed -eq 0 ] && echo PASS
exit $failed
