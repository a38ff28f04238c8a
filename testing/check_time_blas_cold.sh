#!/bin/bash
# time_blas_cold: four modes with positive rates, warm's rate against itself
# 1; a bad --transA exits 2.
# usage: check_time_blas_cold.sh TIME_BLAS_COLD
set -u
prog=$1
fail() { echo "FAIL: $*"; exit 1; }
"$prog" --transA X > /dev/null 2>&1
[ $? -eq 2 ] || fail "--transA X did not exit 2"
csv=$("$prog" --m 96 --n 80 --k 64 --sets 4 --reps 8) || fail "time_blas_cold failed"
echo "$csv"
awk -F, 'NR > 1 { modes = modes " " $6; if (!($8 > 0)) bad = bad " " $6 " rate " $8
                  if ($6 == "warm" && $9 != "1.000") bad = bad " warm vs warm " $9 }
    END { if (modes != " warm cold cold_read cold_huge") bad = bad " modes:" modes
          if (bad) { print "FAIL:" bad; exit 1 } }' <<<"$csv" || exit 1
echo PASS
