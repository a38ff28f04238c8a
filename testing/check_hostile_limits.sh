#!/usr/bin/env bash
# Limits a user or a machine sets (docs/files.md): an output that would
# block (a FIFO), a stop signal before the first step, a batch that cannot
# fit in memory, numbers outside their option's range, more workers than
# cores, a broken tile rule, a read-only or busy tile-model cache. Each must
# end in one clear message (or a warning and a correct run), never a hang:
# every run is under `timeout`.
#   check_hostile_limits.sh TSR_GPT2 TIME_GEMM TESTING_GEMM WORKDIR
set -u
exe=$1 gemm=$2 tgemm=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export TSR_CACHE_DIR="$work/cache"
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
gpt2() { timeout -s KILL 60 "$exe" --model d2 --val-every 0 --sample-every 0 --quiet "$@"; }
cores=$(nproc)

# 1. --csv onto a FIFO: refused at once (it blocked in fopen, deaf to SIGTERM)
mkfifo fifo
timeout -s KILL 60 "$exe" --model d2 --steps 1 --val-every 0 --sample-every 0 --csv fifo > fifo.log 2>&1 &
pid=$! # timeout's: it passes SIGTERM on
for _ in $(seq 80); do kill -0 $pid 2> /dev/null || break; sleep 0.1; done # blocked, with its handlers set
kill -TERM $pid 2> /dev/null; wait $pid; rc=$?
[ $rc -eq 2 ] && grep -q "error: --csv fifo: not a regular file" fifo.log ||
    bad "--csv FIFO: exit $rc (137: still blocked after SIGTERM), $(tail -1 fifo.log)"

# 2. SIGTERM before the first step (here during --tiles auto's measurements,
#    a minute on 2 cores) ends the run at once, by the signal
TSR_CACHE_DIR="$work/cache_signal" timeout -s KILL 60 "$exe" --model d2 --steps 1 --val-every 0 --sample-every 0 \
    --tiles auto > signal.log 2>&1 &
pid=$!
sleep 4; start=$SECONDS; kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 143 ] && [ $((SECONDS - start)) -le 10 ] ||
    bad "SIGTERM before the first step: exit $rc after $((SECONDS - start)) s (not 143 within 10 s)"

# 3. memory: estimated before anything is allocated, printed, refused when
#    over --max-memory or what the machine has (the old binary filled it)
"$exe" --help | grep -q -- "--max-memory SIZE" || bad "--help does not document --max-memory"
gpt2 -B 8 --steps 1 --max-memory 100M > mem_small.log 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "error: rank 0 would need about .* GB .*more than the 0.10 GB of --max-memory" mem_small.log ||
    bad "-B 8 --max-memory 100M: exit $rc, $(head -3 mem_small.log)"
gpt2 -B 4 --steps 0 --max-memory 8G > mem_ok.log 2>&1 && grep -q "memory [0-9.]* GB (estimate" mem_ok.log ||
    bad "-B 4 --max-memory 8G: $(grep -E 'model|error' mem_ok.log | head -2)"
gpt2 --max-memory 12Q > mem_bad.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "error: --max-memory 12Q" mem_bad.log || bad "--max-memory 12Q: exit $rc"
if [ -z "$(grep -l "unknown or incomplete option" mem_small.log)" ]; then # never on a binary that would fill memory
    start=$SECONDS
    gpt2 -B 10000 --steps 1 > mem_huge.log 2>&1; rc=$?
    [ $rc -ne 0 ] && [ $((SECONDS - start)) -le 20 ] && grep -q "error: rank 0 would need about 1[0-9][0-9]\.[0-9]* GB" mem_huge.log &&
        grep -q -- "--max-memory SIZE" mem_huge.log || bad "-B 10000: exit $rc, $(grep error mem_huge.log | head -2)"
fi

# 4. numbers: the 1e9 limit stated, floats finite as floats, eps above 0
gpt2 -B 2000000000 > big.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "from 1 to 1000000000" big.log || bad "-B 2e9: exit $rc, $(head -1 big.log)"
"$exe" --help | grep -q "1e9" || bad "--help does not state the 1e9 limit"
for case in "lr 1e39" "eps 0" "wd 1e40" "eps 1e-50"; do
    set -- $case
    gpt2 "--$1" "$2" > float.log 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q "error: --$1 $2: expected a number .* to 3.4e38" float.log ||
        bad "--$1 $2: exit $rc, $(head -1 float.log)"
done

# 5. more workers than cores: a warning (as STARPU_NCPU gives)
gpt2 --steps 0 --threads $((cores + 1)) > threads.log 2>&1
grep -q "warning: $((cores + 1)) CPU workers asked for" threads.log || bad "--threads $((cores + 1)): no warning"

# 6. a broken tile rule is named alone, with its values
gpt2 --steps 0 --tile-tok 48 > tiles.log 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "bad tiles: the token tile 48 must divide T = 64" tiles.log && ! grep -q "NH" tiles.log ||
    bad "--tile-tok 48: exit $rc, $(grep error tiles.log)"

# 7. testing_gemm --pws above its CPU workers: refused as tsr_gpt2 does
timeout 60 "$tgemm" --m 8 --n 8 --k 8 --mb 8 --nb 8 --kb 8 --threads "$cores" --pws $((cores + 1)) > pws.log 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "error: --pws $((cores + 1)) is larger than" pws.log || bad "testing_gemm --pws: exit $rc"

# 8. a read-only cache: one warning, read but never written, no false
#    "cached in"; a busy cache (another process holds its lock): says so
tg() { timeout 120 "$gemm" --m 64 --n 64 --k 64 --threads 1 --niter 1 --no-baseline --tiles auto --mode ordered "$@"; }
mkdir -p ro/tile_models && chmod 700 ro ro/tile_models
if [ "$(id -u)" -eq 0 ]; then # root writes anywhere: a read-only bind mount in a mount namespace
    unshare -m sh -c 'mount --bind ro ro && mount -o remount,bind,ro ro && TSR_CACHE_DIR="$PWD/ro" "$0" --m 64 \
        --n 64 --k 64 --threads 1 --niter 1 --no-baseline --tiles auto --mode ordered' "$gemm" > ro.log 2>&1
else
    chmod 500 ro/tile_models && TSR_CACHE_DIR="$work/ro" tg > ro.log 2>&1
fi
rc=$?
chmod 700 ro/tile_models
if grep -q "mount: " ro.log; then
    echo "(no read-only bind mount here: the read-only cache is not checked)"
else
    [ $rc -eq 0 ] && [ "$(grep -c "tile models" ro.log)" -eq 1 ] && ! grep -q "error" ro.log &&
        ! grep -q "once; cached in" ro.log && [ -z "$(ls ro/tile_models)" ] ||
        bad "read-only cache: exit $rc, $(grep -c tessera ro.log) lines: $(grep -E 'error|cached' ro.log | head -3)"
fi
mkdir -p busy/tile_models && chmod 700 busy busy/tile_models
exec 9> busy/tile_models/.lock && flock 9 # this shell holds the lock (no process left behind)
TSR_CACHE_DIR="$work/busy" tg > busy.log 2>&1 9>&-; rc=$?
exec 9>&-
[ $rc -eq 0 ] && grep -q "another process is measuring" busy.log && ! grep -q "once; cached in" busy.log &&
    [ -z "$(ls busy/tile_models)" ] || bad "busy cache: exit $rc, $(grep tessera busy.log | head -3)"

[ $fails -eq 0 ] && echo "hostile limits: all checks passed"
exit $((fails > 0))
