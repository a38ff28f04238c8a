#!/bin/bash
# time_fusion with every case skipped (qkv needs NH | C: 64 channels, 12
# heads) prints no row: it must not exit 0 as if it had measured something.
# usage: check_time_fusion_skipped.sh TIME_FUSION
set -u
err=$("$1" --op qkv --C 64 --NH 12 --BT 64 --tile 64 --niter 1 --warmup 0 --threads 1 2>&1 >/dev/null)
rc=$?
echo "$err"
[ $rc -eq 2 ] || { echo "FAIL: exit $rc, not 2"; exit 1; }
[[ $err == *"no case ran"* ]] || { echo "FAIL: no 'no case ran' message"; exit 1; }
echo PASS
