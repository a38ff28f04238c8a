#!/bin/bash
# Run one test program on the GPU and check that CUDA workers executed tasks.
#   check_gpu.sh gpu-only|mixed|two-workers COMMAND [ARGS...]
# gpu-only: no CPU worker (STARPU_NCPU=0), so every task must have a CUDA
# implementation; mixed: CPU workers and the GPU together (STARPU_NCPU=2:
# without a CPU worker count the default with a GPU is the GPU alone); two-workers: no
# CPU worker and two CUDA workers sharing the GPU (STARPU_NWORKER_PER_CUDA=2,
# the stand-in for two GPUs). COMMAND may be an mpirun line: the ranks
# inherit the environment and each reports its workers. The test fails
# when the command fails or when the CUDA workers executed no task (from
# StarPU's STARPU_WORKER_STATS report); it is skipped (exit 77) on a machine
# without an NVIDIA GPU.
set -u
mode=${1:-}
shift || true
if [ "$mode" != gpu-only ] && [ "$mode" != mixed ] && [ "$mode" != two-workers ] || [ $# -eq 0 ]; then
    echo "usage: $0 gpu-only|mixed|two-workers COMMAND [ARGS...]" >&2
    exit 2
fi
if ! nvidia-smi -L >/dev/null 2>&1 && [ ! -e /dev/nvidia0 ]; then
    echo "no NVIDIA GPU here: skipped"
    exit 77
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# strict float32 GEMMs: the tests compare with float32 references
export STARPU_WORKER_STATS=1 STARPU_NCUDA=${STARPU_NCUDA:-1} TSR_GPU_TF32=0
if [ "$mode" = mixed ]; then export STARPU_NCPU=2; else export STARPU_NCPU=0; fi
[ "$mode" = two-workers ] && export STARPU_NWORKER_PER_CUDA=2
"$@" 2> >(tee "$log" >&2)
rc=$?
wait
if [ $rc -ne 0 ]; then
    echo "FAIL: the command failed on the GPU ($mode, exit $rc)" >&2
    exit 1
fi
# the report: a worker name line, then "<tab>N task(s)"
cuda_tasks=$(awk '/^CUDA/ { cuda = 1; next } cuda && /task\(s\)/ { n += $1 } { cuda = 0 } END { print n + 0 }' "$log")
echo "CUDA workers executed $cuda_tasks task(s) ($mode)"
if [ "$cuda_tasks" -eq 0 ]; then
    echo "FAIL: no task ran on a CUDA worker" >&2
    exit 1
fi
