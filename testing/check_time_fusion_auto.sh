#!/bin/bash
# time_fusion --tiles auto: the GEMM model's tiles for both ops, whole heads
# dividing C and token tiles dividing T for the fused QKV projection (so the
# fused path is taken), a prediction in the CSV; a bad --tiles word exits 2.
# usage: check_time_fusion_auto.sh TIME_FUSION CACHE_DIR
set -u
prog=$1
export TSR_CACHE_DIR=$2
fail() { echo "FAIL: $*"; exit 1; }

"$prog" --tiles bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "--tiles bogus did not exit 2"

csv=$("$prog" --tiles auto --op gelu,qkv --C 192 --NH 3 --BT 512 --T 128 --niter 1 --warmup 0) ||
    fail "time_fusion --tiles auto failed"
echo "$csv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { rows++
      if ($col["tiles"] != "auto") bad = bad " tiles=" $col["tiles"]
      if (!($col["predicted_seconds"] > 0)) bad = bad " no prediction"
      if ($col["op"] == "qkv") {
          ob = $col["ob"]; nb = $col["nb"]
          if (ob % 64 || 192 % ob) bad = bad " ob " ob " is not whole heads dividing C"
          if (128 % nb) bad = bad " nb " nb " does not divide T"
          if ($col["variant"] == "fused" && $col["fused_path"] != 1) bad = bad " qkv not fused"
      } }
    END { if (rows != 4) bad = bad " " rows " rows, not 4"
          if (bad) { print "FAIL:" bad; exit 1 } }' <<<"$csv" || exit 1
echo "PASS"
