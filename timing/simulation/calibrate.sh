#!/usr/bin/env bash
# Calibrate the performance models a simulation needs, on this machine: real
# runs of time_gemm and tsr_gpt2 (124M) with StarPU's history-based models
# recording every task's duration, for the tile shapes the simulated runs use.
# The models land in timing/simulation/perfmodels/NAME/ (bus/ and codelets/,
# StarPU's layout, plus machine.txt saying where and how they were made).
#
#   timing/simulation/calibrate.sh NAME [BUILD_DIR]
#
#   NAME       the machine's name in the models (letters, digits, . _ -)
#   BUILD_DIR  a normal (not simulated) build (default build)
#
# An existing NAME is replaced. About 3 minutes on 2 cores. CPU workers only
# (STARPU_NCUDA=0). Without mpirun or with a build made without MPI (as the
# GPU node's) the 2-rank runs are skipped, and machine.txt says so: the models
# then lack the sharded gradient sums' shapes.
# shellcheck disable=SC2034,SC2054 # run_N and mpi_N are read through namerefs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "calibrate: error: $*" >&2; exit 2; }

# shellcheck source=../lib/args.sh
. "$root/timing/lib/args.sh"
case ${1:-} in -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; -*) die "unknown option '$(shown "$1")'" ;; esac
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 NAME [BUILD_DIR]"
name=$1
build=${2:-$root/build}
PROG=calibrate check_name NAME "$name"
check_path BUILD_DIR "$build"
gpt2=$build/algorithms/gpt2/tsr_gpt2
gemm=$build/timing/time_gemm
[ -x "$gpt2" ] && [ -x "$gemm" ] || die "no tsr_gpt2 / time_gemm in $(shown "$build") (build it first)"
! grep -q '^STARPU_HAS_SIMGRID:.*=ON' "$build/CMakeCache.txt" 2>/dev/null || die "$(shown "$build") is a simulation build"
cores=$(nproc)
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

work=$(mktemp -d "${TMPDIR:-/tmp}/tsr-calibrate.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STARPU_PERF_MODEL_DIR=$work/sampling STARPU_HOSTNAME=$name STARPU_CALIBRATE=1 STARPU_HOME=$work
export TSR_CACHE_DIR=$work/cache STARPU_NCUDA=0
have_mpirun=no
command -v mpirun >/dev/null && grep -q '^TSR_USE_MPI:BOOL=ON' "$build/CMakeCache.txt" && have_mpirun=yes
half=$((cores / 2 > 0 ? cores / 2 : 1))
scaling_tiles=(--tile-tok 256 --tile-ch 384 --tile-hid 1536 --tile-voc 6288 --tile-heads 6)
quiet=(--val-every 0 --sample-every 0)
rank_args=("${quiet[@]}" --model 124M -B 4 -T 64 --steps 6 --threads "$half")
scaling_rank_args=("${quiet[@]}" --model 124M -B 2 -T 256 --steps 4 --threads "$half" "${scaling_tiles[@]}")
rank1=(-np 1 -x "STARPU_PERF_MODEL_DIR=$work/rank1")
# the runs below, one array each (run_1 ...; mpi_N=1: under mpirun): they are
# also written to machine.txt
# GEMM tiles of 512 and 1024, both accumulations
run_1=("$gemm" --threads "$cores" --m 4096 --n 4096 --k 4096 --tile 512,1024 --mode ordered,redux --niter 3 --no-baseline)
# 124M B4 T64 with the default tiles of 1 rank and of 2 ranks (the validation runs)
run_2=("$gpt2" "${quiet[@]}" --model 124M -B 4 -T 64 --steps 6 --threads "$cores")
run_3=("$gpt2" "${quiet[@]}" --model 124M -B 4 -T 64 --steps 6 --threads "$cores" --sub-batches 2 --tile-tok 128)
# 2 ranks: the sharded state's gradient sums (and the 2-rank validation run)
# (rank 1 keeps its models apart: two ranks saving one file lose samples)
run_4=("${mpirun[@]}" -np 1 "$gpt2" "${rank_args[@]}" : "${rank1[@]}" "$gpt2" "${rank_args[@]}") mpi_4=1
# the scaling runs' tiles: T 256 and T 1024, several sub-batches (their gradients are added), 2 ranks
run_5=("$gpt2" "${quiet[@]}" --model 124M -B 4 -T 256 --steps 5 --threads "$cores" --sub-batches 4 "${scaling_tiles[@]}")
run_6=("$gpt2" "${quiet[@]}" --model 124M -B 2 -T 1024 --steps 4 --threads "$cores" --sub-batches 2 "${scaling_tiles[@]}")
run_7=("${mpirun[@]}" -np 1 "$gpt2" "${scaling_rank_args[@]}" : "${rank1[@]}" "$gpt2" "${scaling_rank_args[@]}") mpi_7=1
nruns=7
# shown_run I: run I as a line of text, the build and work directories left out
shown_run() {
    local -n r=run_$1
    local line="${r[*]}"
    line=${line//"$build/"/}
    line=${line//"$work"/TMP}
    line=${line//"${mpirun[*]}"/mpirun}
    echo "$line"
}
skipped() { local -n m=mpi_$1; [ "${m:-0}" = 1 ] && [ $have_mpirun = no ]; }
for ((i = 1; i <= nruns; i++)); do
    if skipped "$i"; then echo "calibrate: no mpirun or no MPI in $build, skipped: $(shown_run "$i")" >&2; continue; fi
    echo "calibrate: $(shown_run "$i")" >&2
    declare -n cmd=run_$i
    "${cmd[@]}" >"$work/out$i.txt" 2>&1 || { tail -n 20 "$work/out$i.txt" >&2; die "this run failed"; }
    unset -n cmd
done

dest=$here/perfmodels/$name
rm -rf "$dest"
mkdir -p "$dest/bus" "$dest/codelets"
cp "$work/sampling/bus/$name."* "$dest/bus/"
cp -r "$work/sampling/codelets/"* "$dest/codelets/"
{
    echo "Performance models '$name', calibrated by timing/simulation/calibrate.sh on $(date -u +%Y-%m-%d)"
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $cores cores" \
         "($(grep -m1 -o 'avx512f' /proc/cpuinfo || echo 'no AVX-512'))"
    echo "Tessera: $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown); $(grep -m1 -o 'StarPU .*' "$work/out1.txt")"
    step=$(sed -n 's/.*steady state ([0-9]* steps): median step \([0-9.]*\) ms.*/\1/p' "$work/out2.txt")
    echo "Measured: 124M B4 T64, $cores workers, median step $step ms (the second run; timing/simulation/check.sh compares)"
    if [ -f "$work/out4.txt" ]; then
        step=$(sed -n 's/.*steady state ([0-9]* steps): median step \([0-9.]*\) ms.*/\1/p' "$work/out4.txt")
        echo "Measured: 124M B4 T64, 2 ranks, median step $step ms (the fourth run)"
    fi
    echo "Runs (STARPU_CALIBRATE=1, $cores CPU workers):"
    for ((i = 1; i <= nruns; i++)); do
        note=""; skipped "$i" && note=" (skipped: no mpirun or a build without MPI)"
        echo "  $(shown_run "$i")$note"
    done
} >"$dest/machine.txt"
echo "calibrate: models in $dest" >&2
