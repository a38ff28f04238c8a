#!/usr/bin/env bash
# Run a Tessera program on a simulated cluster: StarPU-MPI on SimGrid's SMPI,
# every task's duration taken from performance models calibrated on a real
# machine (calibrate.sh), the network from a platform file. The kernels do not
# run: times are predictions, losses and checksums are meaningless.
#
#   timing/simulation/simulate.sh [options] PROGRAM [ARGS...]
#
#   PROGRAM       tsr_gpt2 or time_gemm (built here against the simulation runtime)
#   --nodes N     simulated nodes, one MPI rank each, 1-64 (default 1)
#   --workers N   CPU workers per node, 1-64 (default 16; 0 with --gpus: the GPU alone)
#   --gpus N      simulated CUDA workers per node, 0-16 (default 0), from models
#                 measured on a GPU (their bus/ says how many the node has); the
#                 scheduler is then dmdas, as on a real GPU node
#   --gpu-link G  with --gpus N above the models' one GPU: N copies of it, each
#                 with its own path to host memory as measured, joined by a
#                 switch of G GB/s each way per GPU (NVLink + NVSwitch: about 450
#                 for H200s); replicate_gpu.sh
#   --models NAME performance models timing/simulation/perfmodels/NAME (default
#                 the only one there, else name one)
#   --platform F  network platform (default timing/simulation/platforms/cluster-100G.xml)
#   --build DIR   the simulation build (default build-sim, build-sim-gpus for
#                 --gpus 4 and more; made when missing)
#   --submit-cost US[,SKIP]  microseconds the submitting thread spends a task it
#                 inserts (and a call it skips), charged in simulated time
#                 (default 13.7,3.8: measured on the 16-core node; 0: only
#                 StarPU's own 1 us a task)
#
# Builds (once, cached) StarPU on SimGrid with deps/starpu/build.sh --simgrid
# and a Tessera build against it (smpicc, static); past 16 nodes also SimGrid's
# library with a fix for large runs (deps/simgrid/build.sh, about 12 minutes
# once). docs/simulation.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PROG=simulate
# shellcheck source=../lib/args.sh
. "$root/timing/lib/args.sh"

nodes=1 workers=16 gpus=0 gpu_link="" models="" submit_cost="" platform=$here/platforms/cluster-100G.xml build=$root/build-sim
show_help() { sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }
option() {
    case $1 in
        --nodes) check_count --nodes "$2" 1 64; nodes=$2 ;;
        --workers) check_count --workers "$2" 0 64; workers=$2 ;;
        --gpus) check_count --gpus "$2" 0 16; gpus=$2 ;;
        --gpu-link) check_count --gpu-link "$2" 1 99999; gpu_link=$2 ;;
        --models) check_name --models "$2"; models=$2 ;;
        --platform) check_path --platform "$2"; platform=$2 ;;
        --build) check_path --build "$2"; build=$2 ;;
        --submit-cost)
            [[ $2 =~ ^[0-9]+(\.[0-9]+)?(,[0-9]+(\.[0-9]+)?)?$ ]] ||
                arg_error "--submit-cost '$(shown "$2")': expected microseconds a task, optionally ,microseconds a skipped call (e.g. 13.7,3.8)"
            submit_cost=$2 ;;
    esac
}
take_options option show_help "(see --help)" "--nodes --workers --gpus --gpu-link --models --platform --build --submit-cost" "$@"
shift "$options_taken"
[ $# -ge 1 ] || arg_error "no program given (tsr_gpt2 or time_gemm; see --help)"
program=$1
shift
case $program in
    tsr_gpt2) target=tsr_gpt2 path=algorithms/gpt2/tsr_gpt2 ;;
    time_gemm) target=time_gemm path=timing/time_gemm ;;
    *) arg_error "program '$(shown "$program")': only tsr_gpt2 and time_gemm run in simulation" ;;
esac
[ "$workers" -ge $((gpus > 0 ? 0 : 1)) ] || arg_error "--workers 0: only with --gpus (the GPU alone)"
[ -f "$platform" ] && [ -r "$platform" ] || arg_error "--platform '$(shown "$platform")' is not a readable file"
if [ -z "$models" ]; then
    found=$(cd "$here/perfmodels" 2>/dev/null && for d in */; do [ -d "$d" ] && echo "${d%/}"; done)
    [ "$(echo "$found" | grep -c .)" = 1 ] ||
        arg_error "name the performance models with --models (there are: $(shown "$(echo "$found" | tr '\n' ' ')"))"
    models=$found
    check_name "the performance models' name" "$models"
fi
model_dir=$here/perfmodels/$models
[ -f "$model_dir/bus/$models.platform.v4.xml" ] || arg_error "no performance models at $model_dir (calibrate.sh makes them)"
have_gpus=$(sed -n 's/^\([0-9]*\) # Number of CUDA nodes.*/\1/p' "$model_dir/bus/$models.config")
if [ "$gpus" -gt "${have_gpus:-0}" ]; then
    [ "${have_gpus:-0}" = 1 ] && [ -n "$gpu_link" ] ||
        arg_error "--gpus $gpus: the models '$models' come from a node with ${have_gpus:-0} GPU(s)$([ "${have_gpus:-0}" = 1 ] && echo ": give --gpu-link GBPS to simulate $gpus copies of its GPU")"
elif [ -n "$gpu_link" ]; then
    arg_error "--gpu-link: only where --gpus asks for more GPUs than the models' node has (${have_gpus:-0})"
fi

# Every simulated rank's memory mappings (its stacks, privatised data, folded
# tile copies) are this process's: about 2300 a rank in a 124M step (8 nodes),
# so Linux's default limit of 65530 stops a run of more than ~16 nodes with
# an allocation failure inside StarPU
maps=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)
if [ "$maps" -gt 0 ] && [ "$maps" -lt $((nodes * 3500)) ]; then
    arg_error "$nodes simulated nodes need about $((nodes * 3500)) memory mappings and vm.max_map_count is $maps: raise it (as root: sysctl -w vm.max_map_count=$((nodes * 8000)))"
fi

# ---- the simulation runtime and build (cached) ------------------------------
# memory nodes: the host's and one a GPU; the runtime built for 4 memory nodes
# has the smaller data handles the many-node CPU runs need, so 4 GPUs and more
# take the one built for 17 (--gpu-node), and a build of their own
runtime=(--simgrid)
if [ "$gpus" -ge 4 ]; then
    runtime+=(--gpu-node)
    [ "$build" = "$root/build-sim" ] && build=$root/build-sim-gpus
fi
prefix=$(bash "$root/deps/starpu/build.sh" "${runtime[@]}")
maxnodes=$(cat "$prefix"/include/starpu/*/starpu_config.h | sed -n 's/^#define STARPU_MAXNODES \([0-9]*\).*/\1/p')
[ "$gpus" -lt "${maxnodes:-2}" ] || arg_error "--gpus $gpus: this simulation runtime has room for $((${maxnodes:-2} - 1)) GPU(s) a node (STARPU_MAXNODES $maxnodes: deps/starpu/build.sh ${runtime[*]})"
# a build this script made (its marker file) follows the runtime when the
# runtime's options change; any other is left alone
marker=$build/.made-by-simulate.sh
if [ -f "$build/CMakeCache.txt" ] && ! grep -q -x -F -e "TSR_STARPU_PREFIX:INTERNAL=$prefix" "$build/CMakeCache.txt"; then
    [ -f "$marker" ] || arg_error "$build was configured against another StarPU; remove it or name another --build"
    echo "simulate: $build was made for another simulation runtime: making it again" >&2
    rm -rf -- "$build"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "simulate: configuring the simulation build in $build" >&2
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTARPU_DIR="$prefix" -DCMAKE_C_COMPILER=smpicc >&2
    touch "$marker"
fi
cmake --build "$build" --target "$target" -j"$(nproc)" >&2

# Transfers inside a node take the latency and bandwidth StarPU measured, not
# SMPI's MPI factors (node_bus_factors.cpp), built once per simulation build
factors=$build/node_bus_factors.so
if [ ! -f "$factors" ] || [ "$here/node_bus_factors.cpp" -nt "$factors" ]; then
    # shellcheck disable=SC2046  # pkg-config prints separate flags
    c++ -std=c++17 -O2 -shared -fPIC -o "$factors.tmp" "$here/node_bus_factors.cpp" $(pkg-config --cflags --libs simgrid) >&2 ||
        arg_error "cannot build $here/node_bus_factors.cpp (needs g++ and libsimgrid-dev)"
    mv -f "$factors.tmp" "$factors"
fi
preload=$factors
# Past 16 nodes SimGrid 3.32's own bookkeeping (a list walk for every finished
# communication) takes most of the time: those runs preload the same library
# with the fix SimGrid 3.34 made (same version and interface, same predictions)
if [ "$nodes" -gt 16 ]; then
    simgrid_prefix=$(bash "$root/deps/simgrid/build.sh")
    preload=$simgrid_prefix/lib/libsimgrid.so.3.32:$preload
fi
[[ $preload =~ ^[A-Za-z0-9/._+:-]+$ ]] ||
    arg_error "the libraries to preload ('$(shown "$preload")', under --build DIR) have characters smpirun's -wrapper cannot carry: name a build directory of letters, digits and / . _ + -"
wrapper=(-wrapper "env LD_PRELOAD=$preload")

# ---- the run: models copied (StarPU may rewrite them), a node of N workers ---
run=$(mktemp -d "${TMPDIR:-/tmp}/tsr-simulate.XXXXXX")
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/sampling"
cp -r "$model_dir/bus" "$model_dir/codelets" "$run/sampling/"
node=$run/sampling/bus/$models.platform.v4.xml
# the calibrated machine's CPU hosts become CPU0 .. CPU(workers-1), alike (one
# at least: the GPU alone still has its node's CPU host)
awk -v n="$((workers > 0 ? workers : 1))" '/<host id="CPU[0-9]+"/ { if (!done) { for (i = 0; i < n; i++) { l = $0; sub(/CPU[0-9]+/, "CPU" i, l); print l } done = 1 } next } { print }' \
    "$model_dir/bus/$models.platform.v4.xml" >"$node"
sed -i "s/^[0-9]* # Number of CPUs/$workers # Number of CPUs/" "$run/sampling/bus/$models.config"
if [ "$gpus" -gt "${have_gpus:-0}" ]; then
    bash "$here/replicate_gpu.sh" "$run/sampling/bus" "$models" "$gpus" "$gpu_link"
    export STARPU_PERF_MODEL_HOMOGENEOUS_CUDA=1   # every copy timed by the measured GPU's models
    echo "simulate: a node of $gpus GPUs, each a copy of the models' one, joined at $gpu_link GB/s each way" >&2
fi
for ((i = 0; i < nodes; i++)); do echo "node$i"; done >"$run/hostfile"

export STARPU_PERF_MODEL_DIR=$run/sampling STARPU_HOSTNAME=$models STARPU_NCPU=$workers STARPU_NCUDA=$gpus
[ "$gpus" -gt 0 ] && export STARPU_SCHED=${STARPU_SCHED:-dmdas}
# the submitting thread's cost: Tessera charges the whole measured cost a
# task (runtime/submit.c), so StarPU's own 1 us a task is off, unless the
# charge is (0: runs as before it)
if [ -n "$submit_cost" ]; then export TSR_SIM_SUBMIT_COST=$submit_cost; fi
[ "${TSR_SIM_SUBMIT_COST:-}" = 0 ] || export STARPU_SIMGRID_TASK_SUBMIT_COST=0
export STARPU_HOME=$run TSR_CACHE_DIR=$run/cache STARPU_SILENT=${STARPU_SILENT:-1}
# SMPI copies each tile through a temporary buffer (StarPU-MPI sends tiles as
# derived datatypes): a fixed mmap threshold gives those back to the system
# (glibc's moving one kept them in the heap: 2.6 instead of 1.9 GB for 2 ranks)
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072}
# StarPU's bus models ask for no TCP window bound (network/TCP-gamma -1, as
# in their platform files); between nodes it never bound (1 TB/s at 2 us)
network=(--cfg=network/TCP-gamma:-1)
# SimGrid's own chatter (configuration, platform version, end-of-run notes) is
# kept to warnings about the run itself
quiet=(--log=xbt_cfg.thres:warning --log=surf_parse.thres:warning --log=smpi_config.thres:error
       --log=ker_lmm.thres:error --log=smpi.thres:warning --log=smpi_kernel.thres:error)
"$prefix/bin/starpu_smpirun" -platform "$platform" -hostfile "$run/hostfile" -np "$nodes" \
    "${wrapper[@]}" "$build/$path" "$@" "${network[@]}" "${quiet[@]}"
