#!/usr/bin/env bash
# Copy a build's programs, libtessera and every non-system shared library they
# load (StarPU, BLIS, hwloc, FxT, libgomp, ...) into one folder, to run them on
# a machine that has none of them installed (e.g. a GPU node without apt).
# The C library, libstdc++/libgcc and the CUDA driver and toolkit libraries
# are left to the target machine.
#
#   deps/bundle.sh BUILD_DIR OUT_DIR
#   then on the target: LD_LIBRARY_PATH=OUT_DIR/lib OUT_DIR/bin/tsr_gpt2 ...
#   (StarPU's tools, e.g. starpu_fxt_tool, are in OUT_DIR/bin too)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR" >&2; exit 2; }
build=$1 out=$2
[ -f "$build/CMakeCache.txt" ] || { echo "error: $build is not a CMake build directory" >&2; exit 1; }
starpu=$(sed -n 's/^TSR_STARPU_PREFIX:INTERNAL=//p' "$build/CMakeCache.txt")
# OUT_DIR is replaced: only an empty directory or one this script made
# (its .tessera-bundle mark, or the bin/ and lib/ of an older one) is removed
if [ -e "$out" ] && [ -n "$(ls -A -- "$out" 2>/dev/null)" ] && [ ! -e "$out/.tessera-bundle" ] &&
   ! { [ -d "$out/bin" ] && [ -d "$out/lib" ]; }; then
    echo "error: OUT_DIR '$out' exists and is not a bundle: name a new directory" >&2; exit 2
fi
rm -rf -- "$out"
mkdir -p "$out/bin" "$out/lib"
: > "$out/.tessera-bundle"
find "$build" -maxdepth 3 -type f -perm -u+x \( -name 'tsr_*' -o -name 'test_*' -o -name 'testing_*' -o -name 'time_*' \) \
    ! -name '*.sh' ! -name '*.bin' -exec cp -t "$out/bin/" -- {} +
cp "$starpu"/bin/starpu_fxt_tool "$starpu"/bin/starpu_machine_display "$out/bin/"
cp -P "$build"/libtessera.so* "$out/lib/"
src=$(sed -n 's/^Tessera_SOURCE_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
mkdir -p "$out/share/tessera/gpt2"   # tsr_gpt2's bundled data, found from bin/../share
cp "$src"/algorithms/gpt2/data/*.bin "$out/share/tessera/gpt2/"
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libcusolver|libnvJitLink|libudev)\.so'
for f in "$out"/bin/* "$out"/lib/libtessera.so; do
    ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    grep -Eq "$system" <<<"$name" || cp -L "$path" "$out/lib/$name"
done
# StarPU's debug information is most of the bundle (15 of 34 MB): a device run
# carries 64 MiB at most. Symbols stay, for backtraces.
strip --strip-debug "$out"/lib/*.so* 2>/dev/null || true
du -sh "$out"
