#!/usr/bin/env bash
# Inputs that disagree with each other or between ranks (docs/files.md, "What
# the ranks check, what a state records"): each must end in a message naming
# the problem and exit 2 before the model is built, never a crash or a hang.
#   check_hostile_inputs.sh TSR_GPT2 TIME_GEMM WORKDIR [MPIRUN... NPFLAG NP]
# Alone: a state resumed on another training file of the same size, --model
# against --load and --resume, a training file too small for one batch, an
# unused small --val, bad states found before the model, --sub-batches not
# dividing B (single-file states of versions 1 and 2 are read in
# check_gpt2_state_shards.sh). With an mpirun launcher (only):
# ranks whose same-named training files differ (in size: the heap overflow of
# the data position's broadcast; in content alone), and -B not a multiple of
# the ranks (issue 44) refused while --sub-batches still splits it.
set -u
exe=$1 work=$3; shift 3
launch=("$@")
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export TSR_CACHE_DIR="$work/cache"
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
quiet=(--val-every 0 --sample-every 0 --quiet)
data=${TSR_TEST_DATA:-$(cd "$(dirname "$exe")/../../.." && pwd)/algorithms/gpt2/data}
[ -f "$data/tiny_shakespeare_train.bin" ] || data=$(dirname "$(readlink -f "$exe")")/../share/tessera/gpt2

le32() { printf "\\$(printf %03o $(($1 & 255)))\\$(printf %03o $((($1 >> 8) & 255)))\\$(printf %03o $((($1 >> 16) & 255)))\\$(printf %03o $((($1 >> 24) & 255)))"; }
tokens() { # tokens FILE N SKIP: an llm.c token file of the bundled data's N tokens after the first SKIP
    { le32 20240520; le32 1; le32 "$2"; head -c 1012 /dev/zero
      tail -c +$((1025 + 2 * $3)) "$data/tiny_shakespeare_train.bin" | head -c $((2 * $2)); } > "$1"
}
# refused NAME PATTERN... -- ARGS: exit 2, every PATTERN in the output, no
# model built (no "model:" line), no step, no "stopped:" after the message
refused() {
    local name=$1; shift
    local pats=()
    while [ "$1" != -- ]; do pats+=("$1"); shift; done; shift
    timeout 120 "$@" > "$name.log" 2>&1; local rc=$? p
    [ $rc -eq 2 ] || { bad "$name: exit $rc, not 2: $(grep -i error "$name.log" | head -2)"; return; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" "$name.log" || { bad "$name: no '$p' in: $(grep -i error "$name.log" | head -2)"; return; }
    done
    ! grep -q "^model:\|^step\|stopped:\|corrupted\|Segmentation\|abort" "$name.log" ||
        bad "$name: went on or crashed: $(grep "^model:\|^step\|stopped:\|corrupted\|Segmentation\|abort" "$name.log" | head -2)"
}

tokens same1.bin 20000 0
tokens same2.bin 20000 5000 # the same size, other tokens
tokens more.bin 30000 0
tokens small.bin 100 0

if [ ${#launch[@]} -eq 0 ]; then
    # a state records its training file: another one of the same size is refused
    timeout 120 "$exe" "${quiet[@]}" --train same1.bin --steps 1 --save s.bin --write-checkpoint d2.ckpt > save.log 2>&1 ||
        bad "saving a state: $(tail -2 save.log)"
    refused resume_other_data "another training file" "same2.bin" "41024 bytes" -- \
        "$exe" "${quiet[@]}" --train same2.bin --steps 2 --resume s.bin
    timeout 120 "$exe" "${quiet[@]}" --train same2.bin --steps 2 --resume s.bin --resume-any-data > any.log 2>&1 &&
        grep -q "resume-any-data: s.bin was saved on another training file" any.log ||
        bad "--resume-any-data: exit $?, $(grep -i "error\|note" any.log | head -2)"
    timeout 120 "$exe" "${quiet[@]}" --train more.bin --steps 2 --resume s.bin --resume-any-data > any2.log 2>&1 &&
        grep -q "from its first batch" any2.log || bad "--resume-any-data, another size: $(grep -i "error\|note" any2.log | head -2)"
    timeout 120 "$exe" "${quiet[@]}" --train same1.bin --steps 2 --resume s.bin > same.log 2>&1 ||
        bad "resuming on the same file: $(grep -i error same.log | head -2)"
    # --model given must match --load's and --resume's model; without it they decide
    refused model_load "--model 124M" "L 12" "--load d2.ckpt" "L 2" -- "$exe" "${quiet[@]}" --model 124M --load d2.ckpt
    refused model_resume "--model micro" "--resume s.bin" -- "$exe" "${quiet[@]}" --model micro --train same1.bin --resume s.bin
    timeout 120 "$exe" "${quiet[@]}" --load d2.ckpt --steps 0 > load.log 2>&1 && grep -q "^model: L 2, C 128" load.log ||
        bad "--load without --model: $(grep -i "error\|^model" load.log | head -2)"
    # a training file too small for one batch: its name, tokens and a batch's
    refused small_train "small.bin" "100 tokens" "B*T + 1 = 257" -- "$exe" "${quiet[@]}" --train small.bin
    # the validation file is read only when validated
    timeout 120 "$exe" "${quiet[@]}" --val small.bin --steps 1 > val0.log 2>&1 ||
        bad "a small --val with --val-every 0 was refused: $(grep -i error val0.log | head -2)"
    refused small_val "small.bin" "100 tokens" -- "$exe" --sample-every 0 --quiet --val small.bin --val-every 5 --steps 1
    # bad states are found before the model is built
    refused resume_not_state "same1.bin" "not a tsr_gpt2 training state" -- "$exe" "${quiet[@]}" --resume same1.bin
    refused resume_batch "another batch shape" "-B 2" -- "$exe" "${quiet[@]}" --train same1.bin --resume s.bin -B 2
    head -c 1000 s.bin > short.bin
    refused resume_short "short.bin" -- "$exe" "${quiet[@]}" --train same1.bin --resume short.bin
    # sub-batches must divide the batch
    refused nsub "--sub-batches 3" "-B 4" -- "$exe" "${quiet[@]}" --sub-batches 3 -B 4
else
    mpirun=("${launch[@]:0:${#launch[@]}-2}") np=${launch[-2]}
    mkdir -p A B
    cp same1.bin A/data.bin
    cp small.bin B/tiny.bin
    # a state saved on rank 0's file; rank 1's file of the same name is smaller
    # (the data position's broadcast overran its buffer: heap corruption, hang)
    cp more.bin A/big.bin; tokens B/big.bin 20000 0
    (cd A && timeout 120 "$exe" "${quiet[@]}" --train big.bin --steps 1 --save ../s.bin > ../save.log 2>&1) ||
        bad "saving a state: $(tail -2 save.log)"
    run2() { # run2 NAME ARGS...: rank 0 in A, rank 1 in B, the same options
        local name=$1; shift
        timeout -s KILL 60 "${mpirun[@]}" "$np" 1 -wdir "$work/A" "$exe" "$@" : "$np" 1 -wdir "$work/B" "$exe" "$@" \
            > "$name.log" 2>&1
    }
    check2() { # check2 NAME RC PATTERN
        [ "$2" -eq 2 ] && grep -qF -- "$3" "$1.log" && ! grep -q "^step\|corrupted\|Segmentation" "$1.log" ||
            bad "$1: exit $2, $(grep -i "error\|corrupt" "$1.log" | head -2)"
    }
    run2 ranks_resume "${quiet[@]}" --train big.bin --steps 2 --resume ../s.bin; rc=$?
    check2 ranks_resume $rc "--train big.bin is another file on rank 1 than on rank 0 (rank 1: 41024 bytes"
    # the same size, other tokens: no longer trained on silently
    cp same2.bin B/data.bin
    run2 ranks_content "${quiet[@]}" --train data.bin --steps 2; rc=$?
    check2 ranks_content $rc "--train data.bin is another file on rank 1 than on rank 0"
    grep -q "FNV-1a" ranks_content.log || bad "ranks_content: the hashes are not named: $(grep error ranks_content.log)"
    # issue 44: -B 4 on 3 ranks
    timeout -s KILL 60 "${mpirun[@]}" "$np" 3 "$exe" "${quiet[@]}" -B 4 --steps 1 > split.log 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -qF -- "-B 4 is not a multiple of the 3 ranks" split.log && grep -qF -- "-B 3 or -B 6" split.log &&
        grep -qF -- "--sub-batches" split.log && ! grep -q "^model:" split.log || bad "-B 4 on 3 ranks: exit $rc, $(grep error split.log)"
    timeout -s KILL 90 "${mpirun[@]}" "$np" 3 "$exe" "${quiet[@]}" -B 4 --sub-batches 2 --steps 1 > split2.log 2>&1 &&
        grep -q "2 sub-batch(es)" split2.log || bad "-B 4 --sub-batches 2 on 3 ranks: exit $?, $(grep error split2.log)"
fi
[ $fails -eq 0 ] && echo "hostile inputs: all checks passed"
exit $((fails > 0))
