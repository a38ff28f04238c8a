#!/bin/sh
# plot_csv.sh FILE.csv OUT.png [xcol] [ycol] [groupcol]
# Plot a timing CSV (header line first) with gnuplot: one line per distinct
# value of groupcol (several columns: "mode,workers"), points sorted by x.
# Columns are found by name. Defaults: x = mb, y = ratio_to_blas (gflops when
# that column is missing or all nan), group = mode. When every x is a power
# of two spanning a factor 4 or more (tile sweeps), the x axis is log2. Lines
# differ in dash and point type and size, so identical lines stay visible.
# Names and the file's content are data: gnuplot gets them as its script's
# arguments (ARG1 ...) and in its data files, never in its code; it draws into
# a temporary that is then copied to OUT.png.
set -eu
PROG=plot_csv.sh
# shellcheck source=lib/args.sh
. "$(dirname "$0")/lib/args.sh"

usage() {
    echo "usage: $0 FILE.csv OUT.png [xcol (mb)] [ycol (ratio_to_blas or gflops)] [groupcol (mode)]" >&2
    exit 2
}

die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# Index (1-based) of column $1 in the header, or nothing.
col_index() {
    printf '%s\n' "$header" | tr ',' '\n' | grep -n -x -F -e "$1" | head -n 1 | cut -d: -f1
}

need_col() {
    i=$(col_index "$1")
    [ -n "$i" ] || die "no column '$(shown "$1")' in $(shown "$csv") (columns: $(shown "$header"))"
    echo "$i"
}

# ratio_to_blas when it holds a number, else gflops.
default_y() {
    i=$(col_index ratio_to_blas)
    if [ -n "$i" ] && COL=$i awk -F, 'NR > 1 && $ENVIRON["COL"] != "nan" && $ENVIRON["COL"] != "" { found = 1 }
                                      END { exit !found }' <"$csv"; then
        echo ratio_to_blas
    else
        echo gflops
    fi
}

# One data file per group in $tmp (g1.tsv, g2.tsv ...: its title, then x and
# y, tab-separated), in order of first appearance; their count in $tmp/count.
# Rows that are repeated headers or have another field count are skipped.
split_groups() {
    X=$ix Y=$iy GROUPS_COLS=$igs DIR=$tmp HDR=$header awk -F, '
        BEGIN { ng = split(ENVIRON["GROUPS_COLS"], g, " "); x = ENVIRON["X"]; y = ENVIRON["Y"]; dir = ENVIRON["DIR"] }
        { sub(/\r$/, "") }
        NR == 1 { nf = NF; next }
        $0 == ENVIRON["HDR"] || NF != nf { next }
        {
            if ($x !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) { print "error: an x value is not a number: " $x > "/dev/stderr"; bad = 1; exit 1 }
            key = $g[1]
            for (i = 2; i <= ng; i++) key = key "/" $g[i]
            if (!(key in id)) {
                id[key] = ++n
                title = key; gsub(/[\t"]/, "\047", title)   # a quoted string in gnuplot data
                printf "\"%s\"\t\n", title > (dir "/t" n)
            }
            printf "%s\t%s\n", $x, $y > (dir "/g" id[key] ".dat")
        }
        END { if (!bad && n == 0) { print "error: no data rows" > "/dev/stderr"; exit 1 }
              print n > (dir "/count") }' <"$csv"
    n=$(cat "$tmp/count")
    i=1
    while [ "$i" -le "$n" ]; do
        sort -g -k1,1 "$tmp/g$i.dat" -o "$tmp/g$i.dat"
        if [ -z "${warned:-}" ] && [ -n "$(cut -f1 "$tmp/g$i.dat" | uniq -d)" ]; then
            echo "warning: several rows share an x value within a group: add columns to the group (e.g. $(shown "$gcol"),workers)" >&2
            warned=1
        fi
        cat "$tmp/t$i" "$tmp/g$i.dat" >"$tmp/g$i.tsv"
        i=$((i + 1))
    done
}

# 1 when every x value is a power of two and they span a factor >= 4.
x_is_powers_of_two() {
    cat "$tmp"/g*.dat | awk '{ x = $1; l = x > 0 ? log(x) / log(2) : 0.5; if (l != int(l)) { bad = 1; exit }
        if (!n++ || x < lo) lo = x; if (x > hi) hi = x } END { exit bad || !(n && hi >= 4 * lo) }'
}

# ARG1 output, ARG2 title, ARG3 x label, ARG4 y label, ARG5 key title,
# ARG6 number of groups, ARG7 1 for a log2 x axis, ARG8 the data directory
write_gnuplot_script() {
    cat <<'EOF'
set terminal pngcairo size 900,600 noenhanced font 'sans,11'
set output ARG1
set datafile missing 'nan'
set datafile separator "\t"
set title ARG2
set xlabel ARG3
set ylabel ARG4
set key outside right title ARG5
set grid
if (ARG7 eq "1") { set logscale x 2 }
n = ARG6 + 0
# later lines: other dashes and point shapes, smaller points, so a line
# hidden by an identical one still shows its points
plot for [i=1:n] sprintf("%s/g%d.tsv", ARG8, i) using 1:2 with linespoints dashtype i \
     pointtype (word("7 5 9 11 13 3", (i - 1) % 6 + 1) + 0) \
     pointsize (2.4 - 0.6 * (i - 1) < 0.6 ? 0.6 : 2.4 - 0.6 * (i - 1)) title columnheader(1)
EOF
}

[ $# -ge 2 ] && [ $# -le 5 ] || usage
csv=$1 png=$2 xcol=${3:-mb} ycol=${4:-} gcol=${5:-mode}
check_path FILE.csv "$csv"
check_path OUT.png "$png"
[ -f "$csv" ] && [ -r "$csv" ] || die "cannot read '$(shown "$csv")'"
[ -s "$csv" ] || die "'$(shown "$csv")' is empty"
command -v gnuplot >/dev/null 2>&1 || die "gnuplot not found (Debian package gnuplot-nox)"
header=$(head -n 1 <"$csv" | tr -d '\r')
[ -n "$ycol" ] || ycol=$(default_y)
ix=$(need_col "$xcol")
iy=$(need_col "$ycol")
case $gcol in '' | ,* | *, | *,,*) die "group columns '$(shown "$gcol")': a comma-separated list of column names" ;; esac
igs=""
rest=$gcol,
while [ -n "$rest" ]; do
    igs="$igs $(need_col "${rest%%,*}")"
    rest=${rest#*,}
done

tmp=$(mktemp -d)
tmp=$(cd "$tmp" && pwd)   # absolute: gnuplot takes a name starting with '|' for a pipe
trap 'rm -rf "$tmp"' EXIT
split_groups
xaxis="" log2=0
if x_is_powers_of_two; then xaxis="; log2 x axis" log2=1; fi
write_gnuplot_script >"$tmp/plot.gp"
gnuplot -c "$tmp/plot.gp" "$tmp/plot.png" "$(basename -- "$csv"): $ycol vs $xcol" "$xcol" "$ycol" "$gcol" \
    "$n" "$log2" "$tmp" || die "gnuplot failed"
cat "$tmp/plot.png" >"$png" || die "cannot write '$(shown "$png")'"
echo "wrote $(shown "$png") ($(shown "$ycol") vs $(shown "$xcol"), one line per $(shown "$gcol")$xaxis)" >&2
