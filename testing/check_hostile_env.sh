#!/usr/bin/env bash
# Environments a user or a batch system may set wrong (docs/files.md): each
# bad StarPU variable must end in a message naming it and exit 1 before
# StarPU starts (StarPU itself aborts with a backtrace), a BLIS_ARCH_TYPE
# this CPU cannot run is ignored with a message (BLIS would die of SIGILL),
# a lost stdout fails the run; under mpirun, ranks started with different
# options stop with a message instead of waiting on each other forever.
#   check_hostile_env.sh TSR_GPT2 TIME_GEMM WORKDIR [MPIRUN NPFLAG NP]
set -u
exe=$1 gemm=$2 work=$3; shift 3
launch=("$@")
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
# The checks set StarPU's, BLIS's and Tessera's variables themselves: none of
# the user's may steer them, however the script is started. StarPU reads
# XDG_CACHE_HOME and STARPU_PERF_MODEL_DIR before STARPU_HOME, so a user's
# one would hide the STARPU_HOME checks. Kept: the sandbox ctest gives
# (STARPU_HOME, STARPU_SILENT, TSR_CACHE_DIR).
for v in $(compgen -e); do
    case $v in
        STARPU_HOME | STARPU_SILENT | TSR_CACHE_DIR) ;;
        STARPU_* | TSR_* | BLIS_* | XDG_CACHE_HOME) unset "$v" ;;
    esac
done
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
tg() { timeout 60 "$gemm" --m 64 --n 64 --k 64 --threads 1 --niter 1 --no-baseline "$@"; }

refused() { # refused VARIABLE=VALUE: exit 1 and a message naming VARIABLE, no abort
    env "$1" "$gemm" --m 64 --n 64 --k 64 --niter 1 --no-baseline > env.log 2>&1; local rc=$?
    [ $rc -eq 1 ] && grep -q "error: tsr_init: ${1%%=*}=" env.log && ! grep -q "abort" env.log ||
        bad "$1: exit $rc, $(grep -v '^m,n' env.log | head -2)"
}
refused STARPU_NCPU=abc
refused STARPU_NCPU=-1
refused STARPU_NCUDA=abc
refused STARPU_NWORKER_PER_CUDA=two
refused STARPU_WORKERS_CPUID=zz,-4
refused TSR_SUBMIT_THREADS=0
refused TSR_SUBMIT_THREADS=65
refused TSR_SUBMIT_THREADS=4x
refused STARPU_HOME=/dev/null
: > afile
refused STARPU_HOME="$work/afile/sub"
env STARPU_WORKERS_CPUID="0-0" STARPU_HOME="$work/new/home" "$gemm" --m 64 --n 64 --k 64 --threads 1 --niter 1 \
    --no-baseline > good.log 2>&1 || bad "good values refused: $(tail -2 good.log)"
env STARPU_NCPU=64 "$gemm" --m 64 --n 64 --k 64 --niter 1 --no-baseline > many.log 2>&1
grep -q "warning: STARPU_NCPU=64 asks for more CPU workers than the" many.log || [ "$(nproc)" -ge 64 ] ||
    bad "no warning for more CPU workers than cores: $(head -2 many.log)"

# BLIS_ARCH_TYPE: a value BLIS does not know, a non-x86 one, and kernels this
# CPU lacks the instructions for are ignored with a message
blis() { # blis VALUE PATTERN
    BLIS_ARCH_TYPE=$1 tg > blis.log 2>&1; local rc=$?
    [ $rc -eq 0 ] && grep -q "BLIS_ARCH_TYPE=$1 ignored: $2" blis.log || bad "BLIS_ARCH_TYPE=$1: exit $rc, $(head -2 blis.log)"
}
if grep -q "BLIS" <("$gemm" --help 2>&1; tg 2>&1); then
    blis abc "not one of BLIS's architecture numbers"
    blis 15 "not an x86-64 architecture"
    if ! grep -qw avx512f /proc/cpuinfo; then blis 0 "its skx kernels need AVX-512"
    elif ! grep -qw avx512er /proc/cpuinfo; then blis 1 "its knl kernels need a Xeon Phi"; fi
fi

# stdout lost: the run fails and says so
"$exe" --model d2 --steps 1 --val-every 0 --sample-every 0 > /dev/full 2> full.log
[ $? -ne 0 ] && grep -q "cannot write the output" full.log || bad "tsr_gpt2 > /dev/full: $(tail -1 full.log)"

# mpirun: ranks with different options
if [ ${#launch[@]} -ge 3 ]; then
    mpirun=("${launch[@]:0:${#launch[@]}-2}") np=${launch[-2]}
    timeout 120 "${mpirun[@]}" "$np" 1 "$exe" --model d2 --steps 2 : "$np" 1 "$exe" --model d2 --steps 2 --csv r1.csv \
        > mpmd.log 2>&1; rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "other options than rank 0" mpmd.log ||
        bad "ranks with different options: exit $rc, $(grep -i error mpmd.log | head -2)"
fi
[ $fails -eq 0 ] && echo "hostile environment: all checks passed"
exit $((fails > 0))
