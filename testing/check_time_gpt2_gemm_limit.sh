#!/bin/bash
# time_gpt2_gemms: the step's GEMM count (3 x 2 x N x the weights' size),
# one line per timed step, a median line and a square line (the GFLOP at
# the square product's rate), positive times; bad options
# exit 2. time_gpt2_gemm_limit.sh: one round per shape and the median line,
# the ratio and share consistent with the two times; bad options exit 2.
# usage: check_time_gpt2_gemm_limit.sh SCRIPT BUILD_DIR
set -u
script=$1 build=$2
gemms=$build/timing/time_gpt2_gemms
fail() { echo "FAIL: $*"; exit 1; }
for bad in "--model 999M" "--B 0" "--threads 0" "--steps 0"; do
  # shellcheck disable=SC2086
  "$gemms" $bad > /dev/null 2>&1
  [ $? -eq 2 ] || fail "time_gpt2_gemms $bad did not exit 2"
done
csv=$("$gemms" --model d2 --B 4 --T 64 --threads 1 --steps 2) || fail "time_gpt2_gemms failed"
echo "$csv"
# d2: L 2, C 128, Vp 50304; N 256 tokens: 3 * 2 * 256 * (2 * 12 * 128^2 + 50304 * 128) = 10.49 GFLOP
# The CSV's numbers are rounded (ms to 0.1, GFLOP to 0.01, GFLOP/s to 0.1):
# a quotient of two of them is compared within what the rounding allows.
near='function near(x, a, b, da, db, dx) { q = a / b; d = x - q; if (d < 0) d = -d
                                        return d <= dx + q * (da / a + db / b) * 1.01 }'
awk -F, "$near"'
     NR > 1 { rows = rows " " $5; if (!($9 > 0) || !($11 > 0)) bad = bad " times " $0
                  if ($10 != "10.49") bad = bad " gflop " $10
                  if ($5 == "square" && !near($9, 1000 * $10, $11, 5, 0.05, 0.05)) bad = bad " square " $0 }
         END { if (rows != " 1 2 median square") bad = bad " rows:" rows
               if (bad) { print "FAIL:" bad; exit 1 } }' <<<"$csv" || exit 1
"$script" --rounds x > /dev/null 2>&1
[ $? -eq 2 ] || fail "--rounds x did not exit 2"
"$script" --steps 3 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--steps 3 did not exit 2"
csv=$("$script" --model d2 --bt 2:32 --threads 2 --rounds 1 --steps 4 --build "$build") || fail "the script failed"
echo "$csv"
awk -F, "$near"'
     NR > 1 { rows = rows " " $5
                  if (!($6 > 0) || !($7 > 0) || !($10 > 0)) { bad = bad " times " $0; next }
                  if (!near($8, $6, $7, 0.05, 0.05, 0.0005)) bad = bad " ratio " $0
                  if (!near($9, $7, $6, 0.05, 0.05, 0.0005)) bad = bad " share " $0
                  if (!near($11, $6, $10, 0.05, 0.05, 0.0005)) bad = bad " square " $0 }
         END { if (rows != " 1 median") bad = bad " rows:" rows
               if (bad) { print "FAIL:" bad; exit 1 } }' <<<"$csv" || exit 1
echo PASS
