# shellcheck shell=bash disable=SC2034,SC2154 # apt_opts is the caller's; it sets prefix and log
# Sourced by deps/*/build.sh: a Debian source package fetched through a
# private apt configuration, checked, unpacked and patched, with a build log.
# The caller defines say() and die(), and sets prefix and log before fail().

# tessera_cache_dir: the cache root, $TSR_CACHE_DIR, else
# $XDG_CACHE_HOME/tessera (when absolute), else $HOME/.cache/tessera; a
# relative TSR_CACHE_DIR or no absolute HOME stops the run (a relative cache
# would move with the current directory; no home: no cache in a shared place)
tessera_cache_dir() {
    local c
    if [ -n "${TSR_CACHE_DIR:-}" ]; then
        c=$TSR_CACHE_DIR
        [[ $c == /* ]] || die "TSR_CACHE_DIR '$c' is a relative path: give an absolute one"
    elif [[ ${XDG_CACHE_HOME:-} == /* ]]; then
        c=$XDG_CACHE_HOME/tessera
    elif [[ ${HOME:-} == /* ]]; then
        c=$HOME/.cache/tessera
    else
        die "no cache directory: HOME is unset or not an absolute path (set TSR_CACHE_DIR to an absolute path)"
    fi
    [[ $c != *$'\n'* ]] || die "the cache directory's name has a newline (TSR_CACHE_DIR, XDG_CACHE_HOME or HOME)"
    echo "$c"
}

# debian_apt_init DIR SUITE: apt_opts for deb-src lines of SUITE on the
# system's Debian mirror (its sources are not edited), with apt's state and
# cache in DIR; sets mirror
debian_apt_init() {
    local dir=$1 suite=$2
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
    [ -z "$mirror" ] && mirror=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1)
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d/debian.sources}"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$dir/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o APT::Sandbox::User=root)
}

# debian_check_sha256 FILE SHA256: a file that differs is removed, and the run stops
debian_check_sha256() {
    local sum
    sum=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$sum" != "$2" ]; then
        rm -f "$1"
        die "sha256 of $(basename "$1") is $sum, expected $2 (file removed; run again)"
    fi
}

# fail WHAT: the log's last lines, no prefix left behind, and stop
fail() {
    echo "----- last lines of $log -----" >&2
    tail -n 30 "$log" >&2
    rm -rf "$prefix"
    die "$1 failed; full log: $log"
}

# debian_unpack_patched TARBALL DIR PATCHDIR: the tarball's top directory
# unpacked into DIR (emptied first), then PATCHDIR/*.patch applied, logged to $log
debian_unpack_patched() {
    local p
    rm -rf "$2"
    mkdir -p "$2"
    tar -xf "$1" -C "$2" --strip-components=1
    for p in "$3"/*.patch; do
        echo "== patch $(basename "$p")" >>"$log"
        (cd "$2" && patch -p1 --forward <"$p") >>"$log" 2>&1 || fail "patch $(basename "$p")"
    done
}
