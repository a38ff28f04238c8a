#!/usr/bin/env bash
# Sharded training states (docs/files.md, "Training states"), on the d2 model:
#   ranks: a state saved by 2 ranks resumes on 1 rank (with other tiles) and
#          on 4 ranks with the losses of the uninterrupted 2-rank run (1e-5);
#          the same state as one file of format version 2 (written by
#          gpt2_state_single) resumes on 2 ranks, and as version 1 (no
#          training-file identity) on 1 rank, with those losses too;
#   kill:  a rank killed (SIGKILL) in a save, after its shard file is written
#          and before the commit (TSR_GPT2_TEST_DIE_IN_SAVE), rank 1 of 2 and
#          then rank 0 alone: the previous state still resumes with the
#          uninterrupted run's losses, and the next save removes the shard
#          files the killed one left.
# usage: check_gpt2_state_shards.sh ranks|kill TSR_GPT2 GPT2_STATE_SINGLE WORKDIR MPIRUN... NPFLAG
set -u
what=$1 exe=$2 single=$3 work=$4; shift 4
mpirun=("$@")
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_start "$work"
cd "$work" || exit 1
export TSR_CACHE_DIR="$work/cache"
data=${TSR_TEST_DATA:-$(cd "$(dirname "$exe")/../../.." && pwd)/algorithms/gpt2/data}
opts=(--val-every 0 --sample-every 0 --quiet --threads 1)
run() { # run NP ARGS...: tsr_gpt2 on NP ranks (1: no mpirun)
    local np=$1; shift
    if [ "$np" -eq 1 ]; then timeout -s KILL 150 "$exe" "${opts[@]}" "$@"
    else timeout -s KILL 150 "${mpirun[@]}" "$np" "$exe" "${opts[@]}" "$@"; fi
}
# same_losses NAME CSV: CSV's steps have full.csv's losses (1e-5 relative)
same_losses() {
    if awk -F, 'NR == FNR { if (FNR > 1) want[$1] = $2; next }
                FNR > 1 { n++; d = ($2 - want[$1]) / want[$1]; if (!($1 in want) || d > 1e-5 || d < -1e-5) exit 1 }
                END { exit n == 0 }' full.csv "$2"; then ok
    else bad "$1: losses [$(tail -n +2 "$2" | cut -d, -f1,2 | tr '\n' ' ')] differ from the uninterrupted" \
             "[$(tail -n +2 full.csv | cut -d, -f1,2 | tr '\n' ' ')]"; fi
}
shards() { ls "$1".shard.* 2> /dev/null | wc -l; }

run 2 --steps 6 --csv full.csv > full.log 2>&1 || bad "the uninterrupted run exited $?: $(tail -2 full.log)"
case $what in
ranks)
    run 2 --steps 3 --save s.bin > save.log 2>&1 || bad "saving on 2 ranks exited $?: $(tail -2 save.log)"
    [ "$(shards s.bin)" -eq 2 ] && ok || bad "2 ranks saved $(shards s.bin) shard files, not 2: $(ls)"
    # one rank reads both shards, its tiles cut otherwise than the savers'
    run 1 --steps 6 --resume s.bin --csv one.csv --tile-ch 48 --tile-hid 96 --tile-voc 5000 > one.log 2>&1 ||
        bad "resuming on 1 rank exited $?: $(tail -2 one.log)"
    same_losses "2 ranks -> 1 rank" one.csv
    run 4 --steps 6 --resume s.bin --csv four.csv > four.log 2>&1 || bad "resuming on 4 ranks exited $?: $(tail -2 four.log)"
    same_losses "2 ranks -> 4 ranks" four.csv
    # single-file states: version 2, then version 1 (its 72-byte header with
    # version 1, without version 2's 16 bytes of training-file identity)
    "$single" s.bin "$data/tiny_shakespeare_train.bin" v2.bin > v2.log 2>&1 || bad "gpt2_state_single: $(cat v2.log)"
    run 2 --steps 6 --resume v2.bin --csv v2.csv > v2r.log 2>&1 || bad "resuming a version 2 state exited $?: $(tail -2 v2r.log)"
    same_losses "a version 2 state on 2 ranks" v2.csv
    le32() { printf "\\$(printf %03o "$1")\\000\\000\\000"; }
    { head -c 4 v2.bin; le32 1; head -c 72 v2.bin | tail -c 64; tail -c +89 v2.bin; } > v1.bin
    run 1 --steps 6 --resume v1.bin --csv v1.csv > v1r.log 2>&1 || bad "resuming a version 1 state exited $?: $(tail -2 v1r.log)"
    grep -q "version 1 state" v1r.log && ok || bad "no note on the version 1 state: $(grep -i note v1r.log)"
    same_losses "a version 1 state on 1 rank" v1.csv
    ;;
kill)
    # rank 1 of 2 dies in the second save (step 4); the first (step 2) stands
    TSR_GPT2_TEST_DIE_IN_SAVE=1:2 run 2 --steps 6 --save k.bin --save-every 2 > kill.log 2>&1; rc=$?
    [ $rc -ne 0 ] && grep -q "rank 1 dies in save 2" kill.log && ok || bad "the killed run: exit $rc, $(tail -2 kill.log)"
    [ "$(shards k.bin)" -ge 3 ] && ok || bad "the killed save's shard files are not there to clean: $(ls)"
    run 2 --steps 6 --resume k.bin --save k.bin --csv after1.csv > after1.log 2>&1 ||
        bad "resuming after rank 1's death exited $?: $(tail -2 after1.log)"
    grep -q "resumed from k.bin at step 2" after1.log && ok || bad "not resumed at step 2: $(grep resumed after1.log)"
    same_losses "after rank 1's death" after1.csv
    [ "$(shards k.bin)" -eq 2 ] && ok || bad "the next save left $(shards k.bin) shard files, not 2: $(ls)"
    # rank 0 (the committer) alone dies in its second save, after its shard
    run 1 --steps 4 --save z.bin --save-every 2 > z0.log 2>&1 || bad "saving on 1 rank exited $?: $(tail -2 z0.log)"
    TSR_GPT2_TEST_DIE_IN_SAVE=0:2 run 1 --steps 6 --resume z.bin --save z.bin --save-every 1 > z1.log 2>&1; rc=$?
    [ $rc -eq 137 ] && [ "$(shards z.bin)" -eq 2 ] && ok ||
        bad "rank 0 killed in its save: exit $rc, $(shards z.bin) shard files (2 expected)"
    run 1 --steps 6 --resume z.bin --csv after0.csv > after0.log 2>&1 ||
        bad "resuming after rank 0's death exited $?: $(tail -2 after0.log)"
    grep -q "resumed from z.bin at step 5" after0.log && ok || bad "not resumed at step 5: $(grep resumed after0.log)"
    same_losses "after rank 0's death" after0.csv
    ;;
*) bad "unknown check '$what'" ;;
esac
check_report "check_gpt2_state_shards $what"
