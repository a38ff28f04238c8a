#!/usr/bin/env bash
# Build Tessera's runtime: StarPU 1.4.10 (with StarPU-MPI and FxT, and CUDA
# when nvcc is found) from Debian's source package, patched for CUDA 13, into
# a cached install prefix. Prints the prefix on stdout; everything else goes
# to stderr. A prefix that is already complete is reused at once.
#
#   deps/starpu/build.sh            build (or reuse) and print the prefix
#   deps/starpu/build.sh --prefix   print the prefix it would use, build nothing
#   deps/starpu/build.sh --simgrid [--prefix]
#                                   the same for the simulation runtime: StarPU
#                                   on SimGrid (Debian's libsimgrid-dev, SMPI),
#                                   static, without CUDA and FxT (docs/simulation.md)
#   deps/starpu/build.sh --simgrid --gpu-node [--prefix]
#                                   the simulation runtime with room for 16
#                                   simulated GPUs a node (simulate.sh --gpus 4
#                                   and more); its data handles are larger, so
#                                   the many-node CPU runs keep the other one
# (the options in any order). A build prints a line a phase on stderr:
# fetching, unpacking, configuring, compiling (by tenths), installing.
#
# Environment:
#   TSR_CACHE_DIR     cache root, an absolute path (default $XDG_CACHE_HOME/tessera,
#                     else ~/.cache/tessera; without either HOME or it: an error)
#   TSR_STARPU_CUDA   auto (default: CUDA when nvcc is found), on, off
#   CUDA_HOME         CUDA toolkit (default: the directory of nvcc, else /usr/local/cuda)
#   TSR_JOBS          make -j (default: nproc)
#
# The prefix is keyed by source version + patches + configure options, so a
# change to any of them builds a new prefix beside the old one.
set -euo pipefail

WANTED_VERSION=1.4.10+dfsg-2
WANTED_SHA256=6b3bb9ec0d79f937882148b2da09ae6cb0ad4d1e83a104be45723dd70eba99c3   # its orig tarball
here=$(cd "$(dirname "$0")" && pwd)

say() { echo "build-starpu: $*" >&2; }
die() { echo "build-starpu: error: $*" >&2; exit 1; }
usage() { echo "build-starpu: error: $1 (usage: $0 [--simgrid [--gpu-node]] [--prefix])" >&2; exit 2; }
simgrid=0 gpu_node=0 print_prefix=0
for arg in "$@"; do
    case $arg in
        --simgrid) simgrid=1 ;;
        --gpu-node) gpu_node=1 ;;
        --prefix) print_prefix=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) usage "unknown argument '$(printf '%s' "$arg" | tr -c '[:print:]' '?')'" ;;
    esac
done
[ $gpu_node = 0 ] || [ $simgrid = 1 ] || usage "--gpu-node is an option of --simgrid"
# shellcheck source=../debian_source.sh
. "$here/../debian_source.sh"
cache=$(tessera_cache_dir)
jobs=${TSR_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]{0,3}$ ]] || die "TSR_JOBS must be a number of jobs from 1 to 9999 (got '$jobs')"

find_nvcc() {
    local nvcc
    nvcc=$(command -v nvcc 2>/dev/null || true)
    [ -z "$nvcc" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && nvcc=$CUDA_HOME/bin/nvcc
    [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
    echo "$nvcc"
}

# ---- configure options (part of the cache key) ------------------------------
options=(--enable-mpi --with-fxt --enable-maxcpus=256 --enable-maxcudadev=16
         --disable-build-doc --disable-build-tests --disable-build-examples
         --disable-starpufft --disable-socl --disable-glpk --disable-starpupy
         --disable-opencl --disable-fortran --disable-hip --disable-mlr --disable-static)
if [ $simgrid = 1 ]; then
    # SMPI runs every rank in one process: StarPU-MPI must be linked
    # statically to be privatised per rank (StarPU refuses shared libraries
    # there), its configure refuses CUDA, and FxT would need a static PIC libfxt.
    # Every simulated rank's data handles share this machine's memory, and a
    # handle's size grows with the memory nodes (32 by default under SimGrid,
    # room for 16 virtual GPUs: 18.7 KB a handle) and workers: a node of the
    # simulation has one memory node and at most 64 CPU workers
    options=(--enable-simgrid --enable-mpi --enable-static --disable-shared --disable-cuda
             --enable-maxcpus=64 --enable-maxnodes=4 "${options[@]:4}")
    # a node of up to 16 GPUs: the host's memory node and one a GPU
    [ $gpu_node = 1 ] && options=("${options[@]/--enable-maxnodes=4/--enable-maxnodes=17}" --enable-maxcudadev=16)
    TSR_STARPU_CUDA=off
fi
nvcc=""
case ${TSR_STARPU_CUDA:-auto} in
    off) ;;
    auto) nvcc=$(find_nvcc) ;;
    on) nvcc=$(find_nvcc); [ -n "$nvcc" ] || die "TSR_STARPU_CUDA=on but nvcc was not found (set CUDA_HOME)" ;;
    *) die "TSR_STARPU_CUDA must be auto, on or off (got '${TSR_STARPU_CUDA}')" ;;
esac
if [ -n "$nvcc" ]; then
    cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$nvcc")")")}
    # kernels for A100 (sm_80) and H100 (sm_90), plus PTX for newer GPUs
    nvccflags="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
    cuda_version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    options+=(--enable-cuda "--with-cuda-dir=$cuda_home" "NVCC=$nvcc" "NVCCFLAGS=$nvccflags")
else
    cuda_version=none
    options+=(--disable-cuda)
fi

key_of() {   # $1 = source version
    { echo "$1"; cat "$here"/patches/*.patch; printf '%s\n' "${options[@]}" "cuda $cuda_version"; } |
        sha256sum | cut -c1-12
}
upstream_of() { local v=${1%%+*}; echo "${v%%-*}"; }   # 1.4.10+dfsg-2 -> 1.4.10
prefix_for() { echo "$cache/starpu-$(upstream_of "$1")$([ $simgrid = 1 ] && echo -simgrid)$([ $gpu_node = 1 ] && echo -gpus)-$(key_of "$1")"; }

if [ $print_prefix = 1 ]; then
    prefix_for "$WANTED_VERSION"
    exit 0
fi

prefix=$(prefix_for "$WANTED_VERSION")
if [ -f "$prefix/.tessera-complete" ]; then
    say "reusing $prefix"
    echo "$prefix"
    exit 0
fi

# ---- prerequisites -----------------------------------------------------------
for tool in apt-get apt-cache gcc g++ make patch pkg-config mpicc sha256sum tar; do
    command -v "$tool" >/dev/null || die "'$tool' is missing (run .ci/install-deps)"
done
for pc in hwloc fxt; do
    pkg-config --exists "$pc" || die "pkg-config cannot find '$pc' (install libhwloc-dev and libfxt-dev)"
done
if [ $simgrid = 1 ]; then
    pkg-config --exists simgrid || die "pkg-config cannot find 'simgrid' (install libsimgrid-dev: run .ci/install-deps)"
    for tool in smpicc smpirun xsltproc; do
        command -v "$tool" >/dev/null || die "'$tool' is missing (install libsimgrid-dev and xsltproc: run .ci/install-deps)"
    done
fi

# ---- fetch Debian's source package through a private apt configuration -------
# Only deb-src lines for unstable, where StarPU 1.4 lives, are added, in our own
# list with our own state and cache directories.
mkdir -p "$cache/downloads"
debian_apt_init "$cache/apt" unstable

version=$WANTED_VERSION
orig=$cache/downloads/starpu_$(upstream_of "$version")+dfsg.orig.tar.gz
if [ ! -f "$orig" ]; then
    say "fetching the list of Debian unstable's source packages from $mirror"
    apt-get "${apt_opts[@]}" -qq update >&2 || die "apt-get update of the private source list failed"
    served=$(apt-cache "${apt_opts[@]}" showsrc starpu 2>/dev/null | sed -n 's/^Version: //p' | sort -uV)
    [ -n "$served" ] || die "Debian unstable serves no 'starpu' source package"
    if ! grep -qx "$WANTED_VERSION" <<<"$served"; then
        version=$(grep '^1\.4\.' <<<"$served" | tail -n1 || true)
        [ -n "$version" ] || die "Debian no longer serves StarPU $WANTED_VERSION nor any 1.4.x (it serves: $(tr "\n" " " <<<"$served"))"
        say "WARNING: Debian no longer serves StarPU $WANTED_VERSION; it serves: $(tr "\n" " " <<<"$served")"
        say "WARNING: falling back to the newest 1.4.x, $version, with the same patches"
        prefix=$(prefix_for "$version")
        orig=$cache/downloads/starpu_$(upstream_of "$version")+dfsg.orig.tar.gz
        if [ -f "$prefix/.tessera-complete" ]; then
            echo "$prefix"
            exit 0
        fi
    fi
    say "downloading starpu $version"
    (cd "$cache/downloads" && apt-get "${apt_opts[@]}" -qq source --download-only "starpu=$version" >&2) ||
        die "apt-get source starpu=$version failed"
    [ -f "$orig" ] || die "the source package did not contain $(basename "$orig")"
fi
[ "$version" != "$WANTED_VERSION" ] || debian_check_sha256 "$orig" "$WANTED_SHA256"

# ---- unpack, patch, configure, build, install --------------------------------
build=$cache/build-$(basename "$prefix")
log=$cache/$(basename "$prefix").log
rm -rf "$prefix"
: >"$log"
say "building StarPU $version (CUDA: $cuda_version) into $prefix; log: $log"
start=$(date +%s)
say "unpacking and patching the source"
debian_unpack_patched "$orig" "$build" "$here/patches"

# make_with_progress: make in $build, a line on stderr at every tenth of its
# compile and link steps (automake's "  CC  file" lines in the log, against
# the count of a whole build of this kind: an estimate, shown up to 99 %)
make_with_progress() {
    local total=240 from pid n pct shown=-1
    [ $simgrid = 1 ] && total=200
    from=$(($(wc -l <"$log") + 1))
    (cd "$build" && make -j"$jobs") >>"$log" 2>&1 &
    pid=$!
    say "compiling with $jobs jobs"
    while kill -0 "$pid" 2>/dev/null; do
        sleep 2
        n=$(tail -n "+$from" "$log" | grep -cE '^  (CC|CXX|NVCC|CCLD|CXXLD) ' || true)
        pct=$((n * 100 / total))
        [ $pct -le 99 ] || pct=99
        if [ $((pct / 10)) -gt "$shown" ]; then
            shown=$((pct / 10))
            say "compiling: $pct % ($n steps done, about $total in all)"
        fi
    done
    wait "$pid"
}

# libcuda.so is linked from the toolkit's stubs so that a GPU-less build machine works
export LIBRARY_PATH=${cuda_home:+$cuda_home/lib64/stubs:}${LIBRARY_PATH:-}
say "configuring (about a minute)"
(cd "$build" && ./configure --prefix="$prefix" "${options[@]}") >>"$log" 2>&1 || fail "configure"
if [ -n "$nvcc" ]; then
    grep -q '^#define STARPU_USE_CUDA 1' "$build/include/starpu_config.h" || fail "configure did not enable CUDA"
fi
if [ $simgrid = 1 ]; then
    grep -q '^#define STARPU_SIMGRID 1' "$build/include/starpu_config.h" || fail "configure did not enable SimGrid"
else
    grep -q '^#define STARPU_USE_FXT 1' "$build/include/starpu_config.h" || fail "configure did not enable FxT"
fi
make_with_progress || fail "make"
say "installing"
(cd "$build" && make install) >>"$log" 2>&1 || fail "make install"
rm -rf "$build"
echo "$version" >"$prefix/.tessera-complete"
say "built in $(( $(date +%s) - start )) s"
echo "$prefix"
