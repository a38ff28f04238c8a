#!/usr/bin/env bash
# The MPI side of a GPU node's bundle: an MPI build's tsr_gpt2, the libraries
# it loads that BASE (deps/bundle.sh's output for the non-MPI build) does not
# already hold byte for byte, and a relocatable copy of this machine's Open
# MPI (Debian's 4.1: orterun, orted, the MCA components that need nothing
# outside the bundle, their help files, and the external PMIx with its own
# components), to run 2 ranks on a node that has no (or another) MPI.
#
#   deps/bundle_mpi.sh BUILD_DIR OUT_DIR [BASE]      (BASE default: bundle)
#   then: LD_LIBRARY_PATH=BASE/lib:CUDA_LIBS OUT_DIR/bin/mpirun --allow-run-as-root \
#           -np 2 OUT_DIR/bin/tsr_gpt2 ...
# OUT_DIR/bin/mpirun is a wrapper: it points Open MPI and PMIx at OUT_DIR
# (OPAL_PREFIX, OPAL_PKGLIBDIR, PMIX_PKGLIBDIR, ...), puts OUT_DIR/lib first in LD_LIBRARY_PATH
# and runs OUT_DIR/bin/orterun; the ranks inherit that environment.
# OUT_DIR/base.sha256 lists the libraries it takes from BASE/lib (StarPU,
# BLIS, hwloc, ...): `cd BASE/lib && sha256sum -c OUT_DIR/base.sha256`.
set -euo pipefail
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 BUILD_DIR OUT_DIR [BASE]" >&2; exit 2; }
build=$1 out=$2 base=${3:-bundle}
grep -q '^TSR_USE_MPI:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
    { echo "error: $build is not a CMake build with TSR_USE_MPI=ON" >&2; exit 1; }
[ -x "$build/algorithms/gpt2/tsr_gpt2" ] || { echo "error: no $build/algorithms/gpt2/tsr_gpt2 (build it)" >&2; exit 1; }
command -v ompi_info > /dev/null || { echo "error: no Open MPI here (ompi_info)" >&2; exit 1; }
ompi() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
mca=$(ompi pkglibdir) help=$(ompi pkgdatadir)
pmix=$(ldd "$mca/mca_pmix_ext3x.so" | awk '$1 == "libpmix.so.2" { print $3 }')
pmix=$(dirname "$(dirname "$(readlink -f "$pmix")")")    # Debian: /usr/lib/<arch>/pmix2
# OUT_DIR is replaced: only an empty directory or one this script made
# (its .tessera-bundle mark, or the bin/ and lib/ of an older one) is removed
if [ -e "$out" ] && [ -n "$(ls -A -- "$out" 2>/dev/null)" ] && [ ! -e "$out/.tessera-bundle" ] &&
   ! { [ -d "$out/bin" ] && [ -d "$out/lib" ]; }; then
    echo "error: OUT_DIR '$out' exists and is not a bundle: name a new directory" >&2; exit 2
fi
rm -rf -- "$out"
mkdir -p "$out"/{bin,lib/openmpi,share/openmpi,etc,pmix/lib/pmix,pmix/share/pmix}
cp "$build/algorithms/gpt2/tsr_gpt2" "$(ompi bindir)"/{orterun,orted} "$out/bin/"
: > "$out/.tessera-bundle"
cp -P "$build"/libtessera.so* "$out/lib/"
mkdir -p "$out/share/tessera/gpt2"   # tsr_gpt2's default data, found from bin/../share
data=$(sed -n 's/^Tessera_SOURCE_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")/algorithms/gpt2/data
cp "$data"/{tiny_shakespeare_train,tiny_shakespeare_val,gpt2_tokenizer}.bin "$out/share/tessera/gpt2/"
# MCA components for one node over shared memory or TCP: none of OpenSHMEM's,
# MPI-IO's, one-sided's, none for a batch system, none that needs a fabric
# library (UCX, libfabric, verbs, PSM, netlink), no optional extras
for f in "$mca"/*.so; do
    case $(basename "$f" .so) in
        mca_atomic_*|mca_memheap_*|mca_scoll_*|mca_spml_*|mca_sshmem_*) continue ;;   # OpenSHMEM
        mca_io_*|mca_fcoll_*|mca_fbtl_*|mca_fs_*|mca_sharedfp_*|mca_osc_*) continue ;;   # MPI-IO, one-sided
        *slurm|*gridengine|*flux|*jsm|mca_pml_cm|mca_vprotocol_*|mca_topo_treematch) continue ;;
        mca_coll_han|mca_coll_adapt|mca_coll_sm|mca_op_avx|libompi_dbg_msgq) continue ;;
    esac
    grep -Eq 'lib(ucp|uct|ucs|fabric|ibverbs|psm|nl-3|oshmem|mca_common_(monitoring|ucx|ofi|verbs))' <<<"$(ldd "$f")" ||
        cp "$f" "$out/lib/openmpi/"
done
cp "$help"/help-*.txt "$out/share/openmpi/"
cp "$pmix"/lib/pmix/*.so "$out/pmix/lib/pmix/"
cp "$pmix"/share/pmix/help-*.txt "$out/pmix/share/pmix/"
# Debian's settings (/etc/openmpi, not under the prefix); no single-copy
# (CMA) transfers between the ranks: a container may forbid process_vm_readv;
# one node, started without ssh or rsh (the GPU node has neither: the rsh
# launcher refuses to start there)
cat > "$out/etc/openmpi-mca-params.conf" <<'EOF'
btl_base_warn_component_unused = 0
btl_vader_single_copy_mechanism = none
plm = isolated
EOF
# every library those load, but the C library, the compiler's, CUDA's and
# udev (on any Linux GPU node) and what BASE holds byte for byte (compared
# after stripping debug information, as both are)
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libcusolver|libnvJitLink|libudev)\.so'
for f in "$out"/bin/* "$out"/lib/libtessera.so "$out"/lib/openmpi/*.so "$out"/pmix/lib/pmix/*.so; do
    ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    grep -Eq "$system" <<<"$name" || cp -L "$path" "$out/lib/$name"
done
strip --strip-debug "$out"/bin/* "$out"/lib/*.so* "$out"/lib/openmpi/*.so "$out"/pmix/lib/pmix/*.so 2>/dev/null || true
: > "$out/base.sha256"   # what it loads from BASE/lib (sha256sum -c there before a run)
for f in "$out"/lib/*.so*; do
    n=$(basename "$f")
    if [ ! -L "$f" ] && cmp -s "$f" "$base/lib/$n"; then
        rm "$f"; (cd "$base/lib" && sha256sum "$n") >> "$out/base.sha256"
    fi
done
cat > "$out/bin/mpirun" <<'EOF'
#!/bin/sh
# Open MPI and PMIx from this folder, wherever it is (deps/bundle_mpi.sh); the
# settings of another MPI in the environment are dropped (--mca still works)
b=$(cd "$(dirname "$0")/.." && pwd)
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\|OPAL_[A-Z_]*\|PMIX_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export OPAL_PREFIX="$b" OPAL_BINDIR="$b/bin" OPAL_PKGLIBDIR="$b/lib/openmpi" OPAL_PKGDATADIR="$b/share/openmpi" \
       OPAL_SYSCONFDIR="$b/etc" PMIX_PKGLIBDIR="$b/pmix/lib/pmix" PMIX_PKGDATADIR="$b/pmix/share/pmix" \
       PMIX_SYSCONFDIR="$b/etc" LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$b/bin/orterun" "$@"
EOF
chmod +x "$out/bin/mpirun"
du -sh "$out"
