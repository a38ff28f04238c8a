#!/usr/bin/env bash
# timing/plot_csv.sh: a power-of-two tile sweep gets a log2 x axis, other x
# values a linear one; two identical lines both get their own style; bad input
# is an error. usage: check_plot_csv.sh PLOT_CSV WORKDIR
set -u
plot=$1; work=$2
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_start "$work"
printf 'mb,mode,gflops\n64,ordered,10\n128,ordered,20\n256,ordered,30\n64,redux,10\n128,redux,20\n256,redux,30\n' > "$work/pow2.csv"
printf 'mb,mode,gflops\n64,ordered,10\n384,ordered,20\n768,ordered,20\n' > "$work/lin.csv"
msg=$(sh "$plot" "$work/pow2.csv" "$work/pow2.png" mb gflops mode 2>&1)
[ -s "$work/pow2.png" ] && grep -q "log2 x axis" <<< "$msg" && ok || bad "power-of-two sweep: $msg"
msg=$(sh "$plot" "$work/lin.csv" "$work/lin.png" mb gflops mode 2>&1)
[ -s "$work/lin.png" ] && ! grep -q "log2" <<< "$msg" && ok || bad "linear sweep: $msg"
sh "$plot" "$work/pow2.csv" "$work/x.png" nosuchcol > /dev/null 2>&1 && bad "unknown column accepted" || ok
check_report check_plot_csv
