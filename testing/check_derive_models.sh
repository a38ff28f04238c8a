#!/usr/bin/env bash
# timing/simulation/derive_models.py on a made-up model: a task the model
# lacks is added (a power law between the entries around it, or in
# proportion past them), an entry held with no measurement (n 0) is
# replaced in place, the entry count follows, a second run adds nothing,
# and a folder without codelets/45 is an error.
# usage: check_derive_models.sh DERIVE_MODELS_PY WORKDIR
set -u
derive=$1; work=$2
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_start "$work"
# model_file PATH COUNT ENTRY...: a StarPU format-45 history model, one
# implementation; an ENTRY is "hash size mean n"
model_file() {
    local path=$1 count=$2 e hash size mean n
    shift 2
    mkdir -p "$(dirname "$path")"
    {
        printf '##################\n# Performance Model Version\n45\n\n####################\n# COMBs\n# number of combinations\n1\n'
        printf '####################\n# COMB_0\n# number of types devices\n1\n'
        printf '####################\n# DEV_0\n# device type (CPU - 0, CUDA - 1, OPENCL - 2, MPI_MS - 5, TCPIP_MS - 6)\n0\n'
        printf '####################\n# DEV_0\n# device id \n0\n####################\n# DEV_0\n# number of cores \n1\n'
        printf '##########\n# number of implementations\n1\n#####\n# Model for cpu0_impl0 (Comb0)\n# number of entries\n%d\n' "$count"
        printf '# sumlnx\tsumlnx2\t\tsumlny\t\tsumlnxlny\talpha\t\tbeta\t\tn\tminx\t\tmaxx\n0 0 0 0 nan nan 0 0 0\n'
        printf '# a\t\tb\t\tc\nnan nan nan\n# not multiple-regression-base\n0\n'
        printf '# hash\t\tsize\t\tflops\t\tmean (us or J)\tdev (us or J)\tsum\t\tsum2\t\tn\n'
        for e in "$@"; do
            read -r hash size mean n <<<"$e"
            printf '%s\t%s\tnan\t%s\t0\t%s\t0\t%s\n' "$hash" "$size" "$mean" "$mean" "$n"
        done
    } > "$path"
}
model=$work/models/m/codelets/45/tsr_x_float32.m
model_file "$model" 3 "aaaaaaaa 1000 10 1" "bbbbbbbb 4000 40 1" "cccccccc 2000 0 0"
model_file "$work/rec/codelets/45/tsr_x_float32.vm" 2 "cccccccc 2000 99 1" "dddddddd 8000 99 1"
out=$(python3 "$derive" "$work/models/m" "$work/rec" 2>&1) || bad "derive_models failed: $out"
entry() { awk -v h="$1" '$1 == h { printf "%g %s", $4, $8 }' "$model"; }
[ "$(entry cccccccc)" = "20 1" ] && ok || bad "the unmeasured entry: '$(entry cccccccc)', expected '20 1' (between 10 and 40 us)"
[ "$(entry dddddddd)" = "80 1" ] && ok || bad "the missing entry: '$(entry dddddddd)', expected '80 1' (40 us x 2)"
[ "$(grep -c '^cccccccc' "$model")" = 1 ] && ok || bad "the unmeasured entry is not replaced in place"
[ "$(awk 'p { print; exit } /^# number of entries/ { p = 1 }' "$model")" = 4 ] && ok || bad "the entry count is not 4"
[ "$(wc -l <<<"$out")" = 2 ] && ok || bad "not two derived entries printed: $out"
out=$(python3 "$derive" "$work/models/m" "$work/rec" 2>&1)
[ -z "$out" ] && ok || bad "a second run derived again: $out"
mkdir -p "$work/empty"
out=$(python3 "$derive" "$work/models/m" "$work/empty" 2>&1) && bad "a recording without codelets/45 accepted" ||
    { grep -q "no codelets/45" <<<"$out" && ok || bad "no message naming codelets/45: $out"; }
check_report check_derive_models
