#!/usr/bin/env bash
# tsr_gpt2 on a glob of token shards:
#   - three shards cut from the bundled tiny Shakespeare give llm.c's losses
#     (testing/llmc_d2_3shards_losses.txt: its CPU trainer on the same shards)
#     within 1e-5 over 40 steps: shard order, sample order, epochs;
#   - a run stopped and resumed gives the same losses;
#   - memory does not grow with the data: 1 GB of (sparse) shards costs no
#     more peak RSS than tiny Shakespeare (one process);
#   - a pattern that matches nothing is refused, naming it.
#
#   check_gpt2_shards.sh TSR_GPT2 DATA_DIR ORACLE WORK_DIR [LAUNCHER...]
# (LAUNCHER: e.g. mpiexec --oversubscribe -np 2)
set -euo pipefail
exe=$1 data=$2 oracle=$3 work=$4
launch=("${@:5}")
fail() { echo "FAILED: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/shards" "$work/big"
export STARPU_HOME="$work/starpu" TSR_CACHE_DIR="$work/cache"
unset XDG_CACHE_HOME

# le32 N: N as 4 little-endian bytes
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))\\x$(printf %02x $((($1 >> 16) & 255)))\\x$(printf %02x $((($1 >> 24) & 255)))"; }
# header FILE NTOK: an llm.c token file header (magic 20240520, version 1)
header() { { le32 20240520; le32 1; le32 "$2"; head -c 1012 /dev/zero; } > "$1"; }
# shard NAME FIRST N: tokens [FIRST, FIRST + N) of the training file
shard() {
    header "$work/shards/$1" "$3"
    dd if="$data/tiny_shakespeare_train.bin" bs=2 skip=$((512 + $2)) count="$3" status=none >> "$work/shards/$1"
}
shard train_000.bin 0 2000
shard train_001.bin 2000 3001
shard train_002.bin 5001 1500

# 1. llm.c's losses
"${launch[@]}" "$exe" --model d2 --train "$work/shards/train_*.bin" --steps 40 --val-every 0 --sample-every 0 \
    --threads 1 --csv "$work/shards.csv" > "$work/shards.log" 2>&1 || { cat "$work/shards.log"; fail "the run on shards"; }
awk -F, 'NR == FNR { if ($0 !~ /^#/ && NF) want[n++] = $1; next }
         FNR > 1 { got[m++] = $2 }
         END {
             if (n != 40 || m != 40) { printf "FAILED: %d losses, %d expected\n", m, n; exit 1 }
             for (i = 0; i < n; i++) {
                 d = got[i] - want[i]; if (d < 0) d = -d
                 if (d > worst) worst = d
                 if (d > 1e-5) { printf "FAILED: step %d: %s, llm.c %s\n", i, got[i], want[i]; bad = 1 }
             }
             printf "40 steps on 3 shards: largest difference from llm.c %.2g (bar 1e-5)\n", worst
             exit bad
         }' "$oracle" "$work/shards.csv"

# 2. the same losses when the run stops at step 12 (in the second shard of
#    its first epoch) and resumes, its CSV continued with one header
run_shards() { "${launch[@]}" "$exe" --train "$work/shards/train_*.bin" --val-every 0 --sample-every 0 --threads 1 \
    --csv "$work/resumed.csv" "$@" > "$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fail "the run on shards $*"; }; }
run_shards --model d2 --steps 12 --save "$work/state.bin"
run_shards --steps 40 --resume "$work/state.bin"
[ "$(grep -c '^step,' "$work/resumed.csv")" = 1 ] || fail "the resumed CSV has $(grep -c '^step,' "$work/resumed.csv") headers"
cmp -s <(cut -d, -f1,2 "$work/shards.csv") <(cut -d, -f1,2 "$work/resumed.csv") ||
    fail "the resumed run's losses differ from the whole run's: $(diff <(cut -d, -f1,2 "$work/shards.csv") <(cut -d, -f1,2 "$work/resumed.csv") | head -4)"
echo "stopped at step 12 and resumed: the same 40 losses"

# 3. a pattern matching nothing
if "${launch[@]}" "$exe" --model d2 --train "$work/shards/none_*.bin" --steps 1 > "$work/none.log" 2>&1; then
    fail "a pattern matching nothing was accepted"
fi
grep -q "none_\*.bin: no file matches" "$work/none.log" || { cat "$work/none.log"; fail "no message for the empty pattern"; }

[ ${#launch[@]} -eq 0 ] || exit 0
# 4. peak RSS with 1 GB of data: ten sparse 100 MB shards of token 0
ntok=$(((100 * 1024 * 1024 - 1024) / 2))
for i in 0 1 2 3 4 5 6 7 8 9; do
    header "$work/big/big_$i.bin" "$ntok"
    truncate -s $((1024 + 2 * ntok)) "$work/big/big_$i.bin"
done
rss() { sed -n 's/.*peak RSS \([0-9.]*\) MB.*/\1/p' "$1"; }
"$exe" --model d2 --steps 3 --val-every 0 --sample-every 0 --threads 1 > "$work/small.log" 2>&1 || fail "the small run"
"$exe" --model d2 --train "$work/big/big_*.bin" --steps 3 --val-every 0 --sample-every 0 --threads 1 \
    > "$work/big.log" 2>&1 || { cat "$work/big.log"; fail "the run on 1 GB of shards"; }
small=$(rss "$work/small.log") big=$(rss "$work/big.log")
awk -v s="$small" -v b="$big" 'BEGIN {
    printf "peak RSS: %.1f MB on tiny Shakespeare, %.1f MB on 1 GB of shards\n", s, b
    exit (b - s > 32) }' || fail "the run on 1 GB of shards took more than 32 MB over the small one"
rm -rf "$work/big"
echo "gpt2 shards: ok"
