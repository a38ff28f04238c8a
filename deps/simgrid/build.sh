#!/usr/bin/env bash
# Build the SimGrid library that simulations of more than 16 nodes run on:
# SimGrid 3.32 (Debian bookworm's source package, the version of the system's
# libsimgrid-dev that StarPU's simulation runtime was built against) with the
# patches in deps/simgrid/patches, into a cached prefix. Only the library is
# built; simulate.sh preloads it in place of the system's (same version, same
# interface), so the system's smpirun, smpimain and the StarPU prefix are
# used unchanged. Prints the prefix on stdout; everything else goes to stderr.
# A prefix that is already complete is reused at once.
#
#   deps/simgrid/build.sh            build (or reuse) and print the prefix
#   deps/simgrid/build.sh --prefix   print the prefix it would use, build nothing
#
# Environment: TSR_CACHE_DIR (cache root, an absolute path; default
# $XDG_CACHE_HOME/tessera, else ~/.cache/tessera; without either HOME or it: an error),
# TSR_JOBS (make -j, default nproc). About 12 minutes on one core.
set -euo pipefail

WANTED_VERSION=3.32-2
WANTED_SHA256=4b413d8e9d9b29b8e086b2f3edaec5b1149d7eb52b2e134f1ed13d30891ece7b   # simgrid_3.32.orig.tar.xz
here=$(cd "$(dirname "$0")" && pwd)

say() { echo "build-simgrid: $*" >&2; }
die() { echo "build-simgrid: error: $*" >&2; exit 1; }
case "$*" in
    "" | --prefix) ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
    *) echo "build-simgrid: error: unknown arguments '$(printf '%s' "$*" | tr -c '[:print:]' '?')' (usage: $0 [--prefix])" >&2
       exit 2 ;;
esac
# shellcheck source=../debian_source.sh
. "$here/../debian_source.sh"
cache=$(tessera_cache_dir)
jobs=${TSR_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]{0,3}$ ]] || die "TSR_JOBS must be a number of jobs from 1 to 9999 (got '$jobs')"

# Debian's own configuration (debian/rules: no build type, optimised by
# SimGrid's own flags), less what the library the simulations use does not
# need: Java, ns-3, documentation, the MPICH test suite
options=(-DCMAKE_BUILD_TYPE= -Denable_msg=ON -Denable_smpi=ON -Denable_model-checking=OFF
         -Denable_java=OFF -Denable_ns3=OFF -Denable_python=OFF -Denable_documentation=OFF
         -Denable_smpi_MPICH3_testsuite=OFF -Denable_compile_warnings=OFF)
key=$({ echo "$WANTED_VERSION"; cat "$here"/patches/*.patch; printf '%s\n' "${options[@]}"; } | sha256sum | cut -c1-12)
prefix=$cache/simgrid-${WANTED_VERSION%%-*}-$key
library=$prefix/lib/libsimgrid.so.${WANTED_VERSION%%-*}

if [ "${1:-}" = "--prefix" ]; then
    echo "$prefix"
    exit 0
fi
if [ -f "$prefix/.tessera-complete" ] && [ -f "$library" ]; then
    say "reusing $prefix"
    echo "$prefix"
    exit 0
fi
for tool in apt-get cmake g++ make patch sha256sum strip tar xz; do
    command -v "$tool" >/dev/null || die "'$tool' is missing (run .ci/install-deps)"
done
installed=$(dpkg-query -W -f '${Version}' libsimgrid3.32 2>/dev/null || true)
[ -n "$installed" ] || die "libsimgrid3.32 is not installed (install libsimgrid-dev: run .ci/install-deps)"
[ "${installed%%+*}" = "$WANTED_VERSION" ] ||
    die "the system's SimGrid is $installed, this script patches $WANTED_VERSION: its library would not match"

# ---- Debian's source package, through a private apt configuration -----------
mkdir -p "$cache/downloads"
debian_apt_init "$cache/apt-bookworm" bookworm
orig=$cache/downloads/simgrid_${WANTED_VERSION%%-*}.orig.tar.xz
if [ ! -f "$orig" ]; then
    say "downloading simgrid $WANTED_VERSION's source from $mirror"
    apt-get "${apt_opts[@]}" -qq update >&2 || die "apt-get update of the private source list failed"
    (cd "$cache/downloads" && apt-get "${apt_opts[@]}" -qq source --download-only "simgrid=$WANTED_VERSION" >&2) ||
        die "apt-get source simgrid=$WANTED_VERSION failed"
    [ -f "$orig" ] || die "the source package did not contain $(basename "$orig")"
fi
debian_check_sha256 "$orig" "$WANTED_SHA256"

# ---- unpack, patch, configure, build the library, install it ----------------
build=$cache/build-$(basename "$prefix")
log=$cache/$(basename "$prefix").log
rm -rf "$build" "$prefix"
: >"$log"
debian_unpack_patched "$orig" "$build/src" "$here/patches"
say "building SimGrid $WANTED_VERSION's library into $prefix; log: $log"
start=$(date +%s)
# (from inside the build tree: SimGrid's configure leaves a test program in
# the directory it runs in)
mkdir -p "$build/obj"
(cd "$build/obj" && cmake -S "$build/src" -B . "${options[@]}") >>"$log" 2>&1 || fail "cmake"
cmake --build "$build/obj" --target simgrid -j"$jobs" >>"$log" 2>&1 || fail "make"
mkdir -p "$prefix/lib"
# without its debugging information: 90 MB otherwise, loaded by every run
strip --strip-unneeded -o "$library" "$build/obj/lib/libsimgrid.so.${WANTED_VERSION%%-*}" >>"$log" 2>&1 || fail "strip"
cp "$here"/patches/*.patch "$prefix/"
rm -rf "$build"
echo "$WANTED_VERSION" >"$prefix/.tessera-complete"
say "built in $(( $(date +%s) - start )) s"
echo "$prefix"
