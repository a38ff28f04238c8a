#!/usr/bin/env bash
# Files, names and caches as an attacker or a careless user would set them
# (docs/files.md): planted links at temporary names, a shell command in a
# chart's name, outputs onto inputs, stale temporaries, damaged or planted
# tile caches, a cache with no home. Every case must end in a clear message
# or a correct run: no file clobbered, no command run, no crash or hang.
#   check_hostile_files.sh TSR_GPT2 TIME_GEMM WORKDIR [MPIRUN NP...]
# With an mpirun launcher it also checks that SIGUSR1 sent to mpirun saves
# the state (mpirun passes it on to every rank).
set -u
exe=$1 gemm=$2 work=$3; shift 3
launch=("$@")
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export TSR_CACHE_DIR="$work/cache"
fails=0
ok() { :; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
gpt2() { "$exe" --model d2 --val-every 0 --sample-every 0 --quiet "$@"; }
host=$(hostname | tr -c 'A-Za-z0-9\n-' '_')
data=${TSR_TEST_DATA:-$(cd "$(dirname "$exe")/../../.." && pwd)/algorithms/gpt2/data}
[ -f "$data/gpt2_tokenizer.bin" ] || data=$(dirname "$(readlink -f "$exe")")/../share/tessera/gpt2

# 1. a link planted at the temporary's name never redirects a write: the
#    old scheme's name (<file>.tmp.<pid>) and this one's prefix, for the pid
#    the program will have (exec keeps it)
echo "precious" > victim
bash -c 'ln -s victim ck.bin.tmp.$$; ln -s victim "ck.bin.tmp.'"$host"'.$$.AAAAAA"; exec "$0" --model d2 --steps 1 \
    --val-every 0 --sample-every 0 --quiet --save ck.bin' "$exe" > link.log 2>&1
[ "$(cat victim)" = precious ] && [ -s ck.bin ] && ok || bad "planted links: victim '$(head -c 20 victim)', $(ls -l ck.bin* 2>&1)"
[ "$(stat -c %a ck.bin)" = "$(printf '%o' $((0666 & ~$(umask))))" ] && ok ||
    bad "the saved state's mode is $(stat -c %a ck.bin), not 0666 less the umask"
rm -f ck.bin*

# 2. a chart's name is never gnuplot code (a quote, or a newline and '!')
gpt2 --steps 2 --trace "x'; system(\"touch PWNED\"); y='.png" > trace1.log 2>&1
gpt2 --steps 2 --trace $'y\n!touch PWNED2\n.png' > trace2.log 2>&1
[ ! -e PWNED ] && [ ! -e PWNED2 ] && ok || bad "a --trace name ran a command: $(ls PWNED* 2>&1)"
[ "$(head -c 4 "x'; system(\"touch PWNED\"); y='.png" 2> /dev/null | tail -c 3)" = PNG ] && ok ||
    bad "the chart with a quote in its name was not drawn: $(tail -2 trace1.log)"
mkdir dir.png
gpt2 --steps 30 --trace dir.png > dirpng.log 2>&1 && bad "--trace onto a directory accepted"
grep -q "not a regular file" dirpng.log && ! grep -q "^step" dirpng.log && ok ||
    bad "--trace onto a directory is not refused before training: $(tail -2 dirpng.log)"

# 3. an output is never an input or another output
gpt2 --steps 1 --save state.bin > /dev/null 2>&1
cp "$data/gpt2_tokenizer.bin" tok.bin
same() { # same WHAT args...: refused with "same file", exit 2, nothing written
    local what=$1; shift
    gpt2 --steps 1 "$@" > same.log 2>&1; local rc=$?
    [ $rc -eq 2 ] && grep -q "are the same file" same.log && ok || bad "$what: exit $rc, $(tail -1 same.log)"
}
same "--csv onto --train" --csv "$data/tiny_shakespeare_train.bin"
same "--csv onto --resume" --resume state.bin --steps 2 --csv ./state.bin
same "--save and --write-checkpoint" --save out.bin --write-checkpoint "$work/out.bin"
same "--write-checkpoint onto --tokenizer" --tokenizer tok.bin --write-checkpoint tok.bin
same "--csv and --trace's task list" --csv run.csv --trace run.png
cmp -s tok.bin "$data/gpt2_tokenizer.bin" && ok || bad "the tokenizer was changed"
gpt2 --steps 2 --resume state.bin --save state.bin > resave.log 2>&1 && ok ||
    bad "--resume X --save X (continuing a state in place) refused: $(tail -1 resave.log)"

# 4. temporaries of dead processes (kill -9) are removed by the next save,
#    a zombie's too (an orphan under an init that does not reap stays one),
#    a live process's are kept
sh -c 'exit 0' & dead=$!; wait $dead
sh -c 'sleep 0 & echo $! > zombie.pid; exec sleep 120' & zombie_parent=$!
zombie_state=""
for _ in $(seq 50); do
    zombie=$(cat zombie.pid 2> /dev/null)
    [ -n "$zombie" ] && zombie_state=$(cut -d')' -f2 "/proc/$zombie/stat" 2> /dev/null | cut -c2)
    [ "$zombie_state" = Z ] && break
    sleep 0.2
done
: > "ck.bin.tmp.$host.$dead.QWERTY"; : > "ck.bin.tmp.$host.$zombie.ZOMBIE"; : > "ck.bin.tmp.$host.$$.ASDFGH"
gpt2 --steps 1 --save ck.bin > stale.log 2>&1
kill "$zombie_parent"; wait "$zombie_parent" 2> /dev/null
[ ! -e "ck.bin.tmp.$host.$dead.QWERTY" ] && grep -q "process $dead left" stale.log && ok ||
    bad "a dead process's temporary was not removed: $(ls ck.bin.tmp.* 2>&1) $(tail -1 stale.log)"
if [ "$zombie_state" = Z ]; then
    [ ! -e "ck.bin.tmp.$host.$zombie.ZOMBIE" ] && ok ||
        bad "a zombie process's temporary was not removed: $(ls ck.bin.tmp.* 2>&1) $(tail -1 stale.log)"
else
    bad "no zombie to test with (process $zombie, state '$zombie_state')"
fi
[ -e "ck.bin.tmp.$host.$$.ASDFGH" ] && ok || bad "a live process's temporary was removed"

# 5. tile caches: a planted 1e308, a FIFO, a trial time of 1e10 (and the
#    cache's directory must be the user's alone)
tg() { timeout 120 "$gemm" --m 256 --n 256 --k 256 --threads 1 --niter 1 --no-baseline --tiles auto "$@"; }
tg > cache1.log 2>&1 || bad "first --tiles auto run: $(tail -1 cache1.log)"
model=$(ls cache/tile_models/gemm_float32_*.txt) trials=$(ls cache/tile_models/gemm_trials_*.txt)
sed -i '2,$ s/ [0-9.e+-]*$/ 1e308/' "$model"
tg > cache2.log 2>&1; rc=$?
[ $rc -eq 0 ] && ok || bad "a model of 1e308 s: exit $rc $(tail -1 cache2.log)"
sed -i '2,$ s/ [0-9.e+-]*$/ 1e10/' "$trials"
tg > cache3.log 2>&1 || bad "trials of 1e10 s: $(tail -1 cache3.log)"
grep -q "e+10" "$trials" && bad "a trial time of 1e10 s was kept: $(sed -n 2p "$trials")"
rm -f "$model" && mkfifo "$model"
tg > fifo.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "not a regular file" fifo.log && ok || bad "a FIFO as the model cache: exit $rc, $(tail -1 fifo.log)"
rm -f "$model"; chmod 777 cache/tile_models
tg > open.log 2>&1 || bad "a writable-by-all cache: $(tail -1 open.log)"
grep -q "only you can write" open.log && ok || bad "a cache directory others can write was used: $(tail -1 open.log)"
chmod 700 cache/tile_models
: > plainfile
TSR_CACHE_DIR=$work/plainfile/sub tg > notdir.log 2>&1
grep -q "Not a directory" notdir.log && ok || bad "a cache below a file: $(grep -i cache notdir.log | tail -1)"
# no home: no cache in a shared /tmp, and a missing home is not created
before=$(ls -d /tmp/.cache/tessera 2> /dev/null)
env -u HOME -u XDG_CACHE_HOME -u TSR_CACHE_DIR "$gemm" --m 64 --n 64 --k 64 --threads 1 --niter 1 --no-baseline \
    --tiles auto > nohome.log 2>&1 || bad "no HOME: $(tail -1 nohome.log)"
[ -n "$before" ] || [ ! -e /tmp/.cache/tessera ] && ok || bad "the cache went to the shared /tmp/.cache/tessera"
env -u XDG_CACHE_HOME -u TSR_CACHE_DIR HOME="$work/nonexistent/x" "$gemm" --m 64 --n 64 --k 64 --threads 1 \
    --niter 1 --no-baseline --tiles auto > badhome.log 2>&1 || bad "HOME missing: $(tail -1 badhome.log)"
[ ! -e "$work/nonexistent" ] && ok || bad "a missing HOME was created"

# 6. under mpirun: SIGUSR1 to mpirun saves the state (every rank gets it)
if [ ${#launch[@]} -gt 0 ]; then
    "${launch[@]}" "$exe" --model d2 --val-every 0 --sample-every 0 --steps 100000 --save ms.bin > ms.log 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do grep -q "^step 2:" ms.log && break; sleep 0.5; done
    kill -USR1 $pid; wait $pid; rc=$?
    [ $rc -eq 138 ] && [ -s ms.bin ] && [ -z "$(ls ms.bin.tmp.* 2> /dev/null)" ] && ok ||
        bad "SIGUSR1 to mpirun: exit $rc, $(ls -l ms.bin* 2>&1)"
    "${launch[@]}" "$exe" --model d2 --val-every 0 --sample-every 0 --quiet --steps 0 --resume ms.bin > ms2.log 2>&1 &&
        ok || bad "the state saved on SIGUSR1 does not load: $(tail -2 ms2.log)"
    # every rank's own chart name is checked before the run (rank 1's is a directory)
    mkdir -p ranks.rank1.png
    timeout 120 "${launch[@]}" "$exe" --model d2 --val-every 0 --sample-every 0 --steps 30 --trace ranks.png \
        > ranks.log 2>&1 && bad "--trace onto another rank's directory accepted"
    grep -q "ranks.rank1.png exists and is not a regular file" ranks.log && ! grep -q "^step" ranks.log && ok ||
        bad "another rank's chart name was not checked before the run: $(grep -i error ranks.log | head -2)"
fi
[ $fails -eq 0 ] && echo "hostile files: all checks passed"
exit $((fails > 0))
