#!/bin/bash
# time_blas_cold: both routines in the four modes with positive rates, each
# warm rate against itself 1, the blas rows against themselves 1, ratios
# present on the tessera rows; a bad --transA or --gemm exits 2.
# usage: check_time_blas_cold.sh TIME_BLAS_COLD
set -u
prog=$1
fail() { echo "FAIL: $*"; exit 1; }
"$prog" --transA X > /dev/null 2>&1
[ $? -eq 2 ] || fail "--transA X did not exit 2"
"$prog" --gemm cublas > /dev/null 2>&1
[ $? -eq 2 ] || fail "--gemm cublas did not exit 2"
csv=$("$prog" --m 96 --n 80 --k 64 --sets 4 --reps 8) || fail "time_blas_cold failed"
echo "$csv"
awk -F, 'NR > 1 { rows = rows " " $6 ":" $7; if (!($9 > 0)) bad = bad " " $6 " " $7 " rate " $9
                  if ($7 == "warm" && $10 != "1.000") bad = bad " " $6 " warm vs warm " $10
                  if ($6 == "blas" && $11 != "1.000") bad = bad " blas vs blas " $11
                  if ($6 == "tessera" && !($11 > 0)) bad = bad " tessera vs blas " $11 }
    END { want = ""
          split("warm cold cold_read cold_huge", m, " ")
          for (i = 1; i <= 4; i++) want = want " blas:" m[i] " tessera:" m[i]
          if (rows != want) bad = bad " rows:" rows
          if (bad) { print "FAIL:" bad; exit 1 } }' <<<"$csv" || exit 1
echo PASS
