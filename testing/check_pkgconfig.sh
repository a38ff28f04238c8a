#!/bin/bash
# The pkg-config recipe (cc prog.c $(pkg-config --cflags --libs tessera))
# builds a program that starts without LD_LIBRARY_PATH: tessera.pc's Libs
# carry the installed library's RPATH.
# usage: check_pkgconfig.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
starpu=$(sed -n 's/^TSR_STARPU_PREFIX:INTERNAL=//p' "$build/CMakeCache.txt")
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$starpu/lib/pkgconfig"
libs=$(pkg-config --libs tessera) || fail "pkg-config --libs tessera"
echo "pkg-config --libs tessera: $libs"
cc -o "$prefix/solver_gemm_pc" "$src/testing/install_example/solver_gemm.c" $(pkg-config --cflags tessera) $libs -lm ||
    fail "the build with pkg-config's flags"
env -u LD_LIBRARY_PATH "$prefix/solver_gemm_pc" || fail "the program built with pkg-config's flags does not start"
echo PASS
