#!/bin/sh
# plot_csv.sh FILE.csv OUT.png [xcol] [ycol] [groupcol]
# Plot a timing CSV (header line first) with gnuplot: one line per distinct
# value of groupcol (several columns: "mode,workers"), points sorted by x.
# Columns are found by name. Defaults: x = mb, y = ratio_to_blas (gflops when
# that column is missing or all nan), group = mode. When every x is a power
# of two spanning a factor 4 or more (tile sweeps), the x axis is log2. Lines
# differ in dash and point type and size, so identical lines stay visible.
set -eu

usage() {
    echo "usage: $0 FILE.csv OUT.png [xcol (mb)] [ycol (ratio_to_blas or gflops)] [groupcol (mode)]" >&2
    exit 2
}

die() {
    echo "error: $*" >&2
    exit 1
}

# Index (1-based) of column $1 in the header, or nothing.
col_index() {
    printf '%s\n' "$header" | tr ',' '\n' | grep -n -x -F -- "$1" | head -n 1 | cut -d: -f1
}

need_col() {
    i=$(col_index "$1")
    [ -n "$i" ] || die "no column '$1' in $csv (columns: $header)"
    echo "$i"
}

# ratio_to_blas when it holds a number, else gflops.
default_y() {
    i=$(col_index ratio_to_blas)
    if [ -n "$i" ] && awk -F, -v c="$i" 'NR > 1 && $c != "nan" && $c != "" { found = 1 } END { exit !found }' "$csv"; then
        echo ratio_to_blas
    else
        echo gflops
    fi
}

# One data file per group in $tmp (g1.dat, g2.dat ...) and its title in
# $tmp/titles, in order of first appearance. Rows that are repeated headers or
# have another field count are skipped.
split_groups() {
    awk -F, -v x="$ix" -v y="$iy" -v gl="$igs" -v dir="$tmp" -v hdr="$header" '
        BEGIN { ng = split(gl, g, " ") }
        NR == 1 { nf = NF; next }
        $0 == hdr || NF != nf { next }
        {
            if ($x !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) { print "error: x value \"" $x "\" is not a number" > "/dev/stderr"; bad = 1; exit 1 }
            key = $g[1]
            for (i = 2; i <= ng; i++) key = key "/" $g[i]
            if (!(key in id)) { id[key] = ++n; print key > (dir "/titles") }
            print $x, $y > (dir "/g" id[key] ".dat")
        }
        END { if (!bad && n == 0) { print "error: no data rows" > "/dev/stderr"; exit 1 } }' "$csv"
    for f in "$tmp"/g*.dat; do
        sort -g -k1,1 "$f" -o "$f"
        if [ -n "$(cut -d' ' -f1 "$f" | uniq -d)" ]; then
            echo "warning: several rows share an x value within a group: add columns to the group (e.g. $gcol,workers)" >&2
            break
        fi
    done
}

# 1 when every x value is a power of two and they span a factor >= 4.
x_is_powers_of_two() {
    cat "$tmp"/g*.dat | awk '{ x = $1; l = x > 0 ? log(x) / log(2) : 0.5; if (l != int(l)) { bad = 1; exit }
        if (!n++ || x < lo) lo = x; if (x > hi) hi = x } END { exit bad || !(n && hi >= 4 * lo) }'
}

gnuplot_script() {
    if x_is_powers_of_two; then
        echo "set logscale x 2"
        xaxis="; log2 x axis"
    fi
    cat <<EOF
set terminal pngcairo size 900,600 enhanced font 'sans,11'
set output '$png'
set datafile missing 'nan'
set title "$(basename "$csv"): $ycol vs $xcol" noenhanced
set xlabel '$xcol' noenhanced
set ylabel '$ycol' noenhanced
set key outside right title '$gcol' noenhanced
set grid
EOF
    printf 'plot '
    n=0
    while IFS= read -r title; do
        n=$((n + 1))
        [ "$n" -gt 1 ] && printf ', \\\n     '
        # later lines: other dashes and point shapes, smaller points, so a line
        # hidden by an identical one still shows its points
        ps=$(awk -v n="$n" 'BEGIN { s = 2.4 - 0.6 * (n - 1); printf "%.2f", s < 0.6 ? 0.6 : s }')
        pt=$(( (n - 1) % 6 ))
        printf "'%s/g%d.dat' using 1:2 with linespoints dashtype %d pointtype %d pointsize %s title '%s' noenhanced" \
            "$tmp" "$n" "$n" "$(echo 7 5 9 11 13 3 | cut -d' ' -f$((pt + 1)))" "$ps" "$title"
    done <"$tmp/titles"
    printf '\n'
}

[ $# -ge 2 ] && [ $# -le 5 ] || usage
csv=$1 png=$2 xcol=${3:-mb} ycol=${4:-} gcol=${5:-mode}
[ -f "$csv" ] && [ -r "$csv" ] || die "cannot read '$csv'"
[ -s "$csv" ] || die "'$csv' is empty"
command -v gnuplot >/dev/null 2>&1 || die "gnuplot not found (Debian package gnuplot-nox)"
header=$(head -n 1 "$csv" | tr -d '\r')
[ -n "$ycol" ] || ycol=$(default_y)
ix=$(need_col "$xcol")
iy=$(need_col "$ycol")
igs=""
for name in $(printf '%s\n' "$gcol" | tr ',' ' '); do
    igs="$igs $(need_col "$name")"
done
[ -n "$igs" ] || die "empty group column"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
split_groups
xaxis=""
gnuplot_script >"$tmp/plot.gp"
x_is_powers_of_two && xaxis="; log2 x axis"
gnuplot "$tmp/plot.gp" || die "gnuplot failed"
echo "wrote $png ($ycol vs $xcol, one line per $gcol$xaxis)" >&2
