#!/usr/bin/env bash
# Prove that deps/bundle_mpi.sh's folder runs 2 MPI ranks on its own: in a
# private mount namespace (root, unshare) this machine's Open MPI and PMIx
# (programs, components, help files, configuration), every system copy of a
# library the two bundles hold, the StarPU prefixes and the build trees (the
# programs' RUNPATH) and the source tree's data are hidden; then tsr_gpt2 d2
# B4 T64, 4 steps, on CPU workers: 1 process, then the bundled mpirun -np 2.
# Their losses must agree to 1e-5 relative (the MPI GPT-2 test's bar,
# testing/check_gpt2_driver.sh). Run it from the repository's root.
#
#   deps/check_bundle_mpi.sh [BASE [MPI_BUNDLE]]    (default: bundle bundle-mpi)
set -euo pipefail
base=$(cd "${1:-bundle}" && pwd) mpi=$(cd "${2:-bundle-mpi}" && pwd)
if [ "${TSR_HIDDEN:-}" != 1 ]; then
    empty=$(mktemp -d) nothing=$(mktemp)
    trap 'rm -rf "$empty" "$nothing"' EXIT
    hide=()
    for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi \
             "$HOME"/.cache/tessera/starpu-*/lib "$PWD"/algorithms/gpt2/data; do
        [ -d "$d" ] && hide+=("$d")
    done
    for f in /usr/bin/{orterun,orted,mpirun,mpiexec,ompi_info} "$PWD"/build*/libtessera.so.*.*.* \
             $(cd "$base/lib" && ls; cd "$mpi/lib" && ls); do
        case $f in /*) ;; *) f=$(ls /usr/lib/x86_64-linux-gnu/"$f" 2>/dev/null) || continue ;; esac
        [ -e "$f" ] && hide+=("$(readlink -f "$f")")
    done
    exec unshare -m --propagation private env TSR_HIDDEN=1 TSR_HIDE="${hide[*]}" TSR_EMPTY="$empty" \
        TSR_NOTHING="$nothing" "$0" "$base" "$mpi"
fi
for p in $TSR_HIDE; do [ -d "$p" ] || mount --bind "$TSR_NOTHING" "$p"; done   # files first: some
for p in $TSR_HIDE; do [ -d "$p" ] && mount --bind "$TSR_EMPTY" "$p"; done      # are in the folders
echo "hidden: $TSR_HIDE"
command -v ompi_info > /dev/null && ompi_info > /dev/null 2>&1 && { echo "FAIL: ompi_info still runs" >&2; exit 1; }
export LD_LIBRARY_PATH=$mpi/lib:$base/lib
args=(--model d2 -B 4 -T 64 --steps 4 --val-every 0 --sample-every 0)
losses() { sed -n 's/^step *[0-9]*:.*train loss \([-0-9.eE+naif]*\).*/\1/p'; }
one=$(timeout 300 "$mpi/bin/tsr_gpt2" "${args[@]}" 2>&1 | tee /dev/stderr | losses)
two=$(timeout 300 "$mpi/bin/mpirun" --allow-run-as-root --oversubscribe -np 2 "$mpi/bin/tsr_gpt2" "${args[@]}" 2>&1 |
      tee /dev/stderr | losses)
echo "1 rank:  " $one
echo "2 ranks: " $two
paste -d' ' <(echo "$two") <(echo "$one") | awk 'NF == 2 { d = ($1 - $2) / $2; d = d < 0 ? -d : d; if (d > m) m = d; n++ }
    END { printf "largest relative difference %.3g over %d losses (bar 1e-5)\n", m, n; exit !(n == 4 && m <= 1e-5) }'
