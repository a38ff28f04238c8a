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
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "calibrate: error: $*" >&2; exit 2; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 NAME [BUILD_DIR]"
name=$1
build=${2:-$root/build}
[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "NAME '$name': letters, digits, '.', '_' and '-' only"
gpt2=$build/algorithms/gpt2/tsr_gpt2
gemm=$build/timing/time_gemm
[ -x "$gpt2" ] && [ -x "$gemm" ] || die "no tsr_gpt2 / time_gemm in $build (build it first)"
! grep -q '^STARPU_HAS_SIMGRID:.*=ON' "$build/CMakeCache.txt" 2>/dev/null || die "$build is a simulation build"
cores=$(nproc)
mpirun="mpirun --oversubscribe$([ "$(id -u)" = 0 ] && echo ' --allow-run-as-root')"

work=$(mktemp -d "${TMPDIR:-/tmp}/tsr-calibrate.XXXXXX")
trap 'rm -rf "$work"' EXIT
export STARPU_PERF_MODEL_DIR=$work/sampling STARPU_HOSTNAME=$name STARPU_CALIBRATE=1 STARPU_HOME=$work
export TSR_CACHE_DIR=$work/cache STARPU_NCUDA=0
have_mpirun=no
command -v mpirun >/dev/null && grep -q '^TSR_USE_MPI:BOOL=ON' "$build/CMakeCache.txt" && have_mpirun=yes
half=$((cores / 2 > 0 ? cores / 2 : 1))
scaling_tiles="--tile-tok 256 --tile-ch 384 --tile-hid 1536 --tile-voc 6288 --tile-heads 6"
rank_args="--val-every 0 --sample-every 0 --model 124M -B 4 -T 64 --steps 6 --threads $half"
scaling_rank_args="--val-every 0 --sample-every 0 --model 124M -B 2 -T 256 --steps 4 --threads $half $scaling_tiles"
# the runs below, one per line: they are also written to machine.txt
runs=(
  # GEMM tiles of 512 and 1024, both accumulations
  "$gemm --threads $cores --m 4096 --n 4096 --k 4096 --tile 512,1024 --mode ordered,redux --niter 3 --no-baseline"
  # 124M B4 T64 with the default tiles of 1 rank and of 2 ranks (the validation runs)
  "$gpt2 --val-every 0 --sample-every 0 --model 124M -B 4 -T 64 --steps 6 --threads $cores"
  "$gpt2 --val-every 0 --sample-every 0 --model 124M -B 4 -T 64 --steps 6 --threads $cores --sub-batches 2 --tile-tok 128"
  # 2 ranks: the sharded state's gradient sums (and the 2-rank validation run)
  # (rank 1 keeps its models apart: two ranks saving one file lose samples)
  "$mpirun -np 1 $gpt2 $rank_args : -np 1 -x STARPU_PERF_MODEL_DIR=$work/rank1 $gpt2 $rank_args"
  # the scaling runs' tiles: T 256 and T 1024, several sub-batches (their gradients are added), 2 ranks
  "$gpt2 --val-every 0 --sample-every 0 --model 124M -B 4 -T 256 --steps 5 --threads $cores --sub-batches 4 $scaling_tiles"
  "$gpt2 --val-every 0 --sample-every 0 --model 124M -B 2 -T 1024 --steps 4 --threads $cores --sub-batches 2 $scaling_tiles"
  "$mpirun -np 1 $gpt2 $scaling_rank_args : -np 1 -x STARPU_PERF_MODEL_DIR=$work/rank1 $gpt2 $scaling_rank_args"
)
i=0
for r in "${runs[@]}"; do
    i=$((i + 1))
    if [[ $r == "$mpirun"* && $have_mpirun = no ]]; then echo "calibrate: no mpirun or no MPI in $build, skipped: $r" >&2; continue; fi
    echo "calibrate: $r" >&2
    $r >"$work/out$i.txt" 2>&1 || { tail -n 20 "$work/out$i.txt" >&2; die "this run failed"; }
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
    for r in "${runs[@]}"; do
        skipped=""; [[ $r == "$mpirun"* && $have_mpirun = no ]] && skipped=" (skipped: no mpirun or a build without MPI)"
        r=${r//$build\//}; r=${r//$work/TMP}; echo "  ${r//$mpirun/mpirun}$skipped"
    done
} >"$dest/machine.txt"
echo "calibrate: models in $dest" >&2
