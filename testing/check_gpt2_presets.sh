#!/usr/bin/env bash
# GPT-2 medium, large and XL (--model 350M, 774M, 1558M: llm.c's d24, d36,
# d48). refuse: each one's memory estimate, printed when --max-memory is too
# small, names its parameters, AdamW state and gradients at 4 bytes a
# parameter (and exits 2 before its weights are drawn). step: 350M trains
# one step at B 1, T 64 and its estimate is within 15 % of the peak RSS
# (about 6 GB, a minute on 2 cores).
#   check_gpt2_presets.sh TSR_GPT2 WORKDIR refuse|step
set -u
exe=$1 work=$2 what=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export TSR_CACHE_DIR="$work/cache"
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
gpt2() { timeout -s KILL 170 "$exe" --val-every 0 --sample-every 0 --quiet "$@"; }

if [ "$what" = refuse ]; then
  for model_np in 350M:354871296 774M:774090240 1558M:1557686400; do
    model=${model_np%%:*} np=${model_np#*:}
    start=$SECONDS
    gpt2 --model "$model" -B 1 -T 64 --steps 1 --max-memory 1G > "$model.log" 2>&1; rc=$?
    p=$(awk -v n="$np" 'BEGIN { printf "%.2f", n * 4 / 1e9 }')
    a=$(awk -v n="$np" 'BEGIN { printf "%.2f", n * 8 / 1e9 }')
    grep -q "error: rank 0 would need about [0-9.]* GB (parameters $p, AdamW m and v $a, gradients $p," "$model.log" &&
      [ $rc -eq 2 ] || bad "$model --max-memory 1G: exit $rc, expected parameters $p, AdamW $a GB: $(head -2 "$model.log")"
    # refused before the weights are drawn (1558M's take tens of seconds)
    [ $((SECONDS - start)) -le 15 ] || bad "$model: refused after $((SECONDS - start)) s"
    grep "would need" "$model.log" | cut -c1-200
  done
elif [ "$what" = step ]; then
  gpt2 --model 350M -B 1 -T 64 --steps 1 > step.log 2>&1 ||
    bad "350M B1 T64, 1 step: $(grep -m2 error step.log)"
  est=$(sed -n 's/.*; memory \([0-9.]*\) GB (estimate.*/\1/p' step.log)
  rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MB (rank 0).*/\1/p' step.log)
  grep -q "L 24, C 1024, NH 16, .* 354871296 parameters" step.log || bad "350M's model line: $(grep model: step.log)"
  awk -v e="${est:-0}" -v r="${rss:-0}" 'BEGIN { q = r > 0 ? e * 1e9 / (r * 1048576) : 0
    printf "350M B1 T64: estimate %.2f GB, peak RSS %.2f GB: %.3f\n", e, r * 1048576 / 1e9, q; exit !(q >= 0.85 && q <= 1.15) }' ||
    bad "the estimate is not within 15 % of the peak RSS"
else
  echo "usage: $0 TSR_GPT2 WORKDIR refuse|step" >&2; exit 2
fi
[ $fails -eq 0 ] && echo "PASS ($what)"
exit $((fails > 0))
