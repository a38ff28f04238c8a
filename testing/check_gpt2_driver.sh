#!/usr/bin/env bash
# End-to-end checks of tsr_gpt2 on the bundled tiny Shakespeare:
#  1. the d2 model's first 10 training losses and val losses equal llm.c's
#     (shared/data/llmc_baseline.md) to 1e-5 relative;
#  2. --save / --resume continues with the identical loss trajectory;
#  3. step times say what they cover (CSV timing column) and the summary
#     gives the final loss, without nan for short runs;
#  4. bad inputs give a clear message and a non-zero exit, no crash.
# usage: check_gpt2_driver.sh TSR_GPT2 WORKDIR [launcher...]
set -u
exe=$1; work=$2; shift 2
launch=("$@")
# shellcheck source=check_lib.sh
. "$(dirname "$0")/check_lib.sh"
check_start "$work"
run() { "${launch[@]}" "$exe" --val-every 0 --sample-every 0 "$@"; }

# 1. llm.c's losses (train_gpt2.c, d2 init seed 42, B=4, T=64, shuffled), with
#    the default tiles (fused projections) and with token tiles of two
#    sequences and attention tiles of their own (split/merge path)
want="10.828328 10.824232 10.778888 10.782754 10.747942 10.703804 10.674804 10.652796 10.651034 10.629862"
losses_of() { tail -n +2 "$1" | cut -d, -f2 | tr '\n' ' '; }
same_losses() { # same_losses FILE.csv: its losses are llm.c's to 1e-5
    awk -v w="$want" -v g="$(losses_of "$1")" 'BEGIN { n = split(w, a, " "); m = split(g, b, " "); if (n != m) exit 1;
          for (i = 1; i <= n; i++) { d = (b[i] - a[i]) / a[i]; if (d < 0) d = -d; if (d > 1e-5) exit 1 } }'
}
check_losses() { # check_losses NAME tsr_gpt2-args...
    local name=$1; shift
    run --steps 10 --csv "$work/$name.csv" --quiet "$@" > "$work/$name.log" 2>&1 || bad "$name: run exited $?"
    same_losses "$work/$name.csv" && ok || bad "$name: losses differ from llm.c: got [$(losses_of "$work/$name.csv")] want [$want]"
}
check_losses a
check_losses split --tile-tok 128 --tile-q 16 --tile-k 32 --tile-heads 2
"${launch[@]}" "$exe" --steps 1 --val-every 1 --val-batches 5 --sample-every 0 > "$work/v.log" 2>&1
grep -q "val loss 10.843508" "$work/v.log" && ok || bad "val loss at step 0 is not llm.c's 10.843508: $(grep val "$work/v.log")"

# 2. resume: 3 steps + save, then resume to 6 == 6 straight steps
run --steps 6 --csv "$work/full.csv" --quiet > /dev/null 2>&1
run --steps 3 --save "$work/state.bin" --quiet > /dev/null 2>&1
run --steps 6 --resume "$work/state.bin" --csv "$work/resumed.csv" --quiet > "$work/r.log" 2>&1 || bad "resume exited $?"
a=$(tail -n 3 "$work/full.csv" | cut -d, -f1,2); b=$(tail -n +2 "$work/resumed.csv" | cut -d, -f1,2)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "resumed trajectory [$b] differs from [$a]"

# 3. pipelined step times are labelled: run a (no evaluations) fills the
#    pipeline at step 0 and drains it at step 9; with a validation every 4
#    steps, the steps around each one fill and drain too
kinds=$(tail -n +2 "$work/a.csv" | cut -d, -f6 | tr '\n' ' ')
[ "$kinds" = "fill steady steady steady steady steady steady steady steady drain " ] && ok ||
    bad "timing column of a.csv: [$kinds]"
"${launch[@]}" "$exe" --steps 6 --val-every 4 --sample-every 0 --quiet --csv "$work/v4.csv" > "$work/v4.log" 2>&1
kinds=$(tail -n +2 "$work/v4.csv" | cut -d, -f6 | tr '\n' ' ')
[ "$kinds" = "fill steady steady drain fill drain " ] && ok || bad "timing column with --val-every 4: [$kinds]"
grep -q "steady state (2 steps)" "$work/v4.log" && ok || bad "summary: $(grep summary "$work/v4.log")"
run --steps 1 > "$work/one.log" 2>&1
grep "^summary" "$work/one.log" | grep -q "final train loss 10.8283" && ! grep -qi "nan" "$work/one.log" && ok ||
    bad "one-step summary: $(grep summary "$work/one.log")"
# the summary counts a step's tasks and the workers of each kind; --gpus 0
# (CPUs only) and --strict-fp32 are accepted anywhere
run --steps 2 --gpus 0 --strict-fp32 > "$work/gpus0.log" 2>&1
grep "^summary" "$work/gpus0.log" | grep -q "[1-9][0-9]* tasks a step.* CPU + 0 CUDA workers" && ok ||
    bad "summary with --gpus 0: $(grep summary "$work/gpus0.log")"

# on a terminal (script(1)), the progress bar is erased before each line:
# what the terminal shows of each line (after its last carriage return) never
# holds the bar and a step, validation or sample line together
if command -v script > /dev/null && [ ${#launch[@]} -eq 0 ]; then
    script -qec "$(printf %q "$exe") --steps 6 --val-every 3 --sample-every 5 --sample-len 4" /dev/null > "$work/tty.log" 2>&1
    shown=$(tr -d '\033' < "$work/tty.log" | sed 's/\r$//; s/.*\r//; s/\[K//g')
    if grep -q "^step 5: " <<< "$shown" && ! grep -q '\[#.*\(step\|val loss\|generating\)' <<< "$shown"; then ok
    else bad "progress bar glued to a line: $(grep '\[#' <<< "$shown" | head -2)"; fi
fi

# 4. bad inputs: message + non-zero exit (not a crash: exit codes 1 or 2)
printf 'not a checkpoint' > "$work/bad.bin"
expect_error() { # expect_error PATTERN args...
    local pattern=$1; shift
    run --steps 1 "$@" > "$work/e.log" 2>&1; local rc=$?
    if [ $rc -ne 1 ] && [ $rc -ne 2 ]; then bad "'$*' exited $rc"; return; fi
    grep -qi -- "$pattern" "$work/e.log" && ok || bad "'$*': no message matching '$pattern': $(cat "$work/e.log")"
}
expect_error "no such file\|cannot open\|missing" --train "$work/does_not_exist.bin"
expect_error "magic\|truncated\|format" --load "$work/bad.bin"
head -c 2000 "${TSR_TEST_DATA:-$(dirname "$exe")/../../../algorithms/gpt2/data}/tiny_shakespeare_val.bin" > "$work/trunc.bin" 2>/dev/null ||
    printf 'x' > "$work/trunc.bin"
expect_error "truncated\|size\|format\|magic" --val "$work/trunc.bin" --val-every 1
expect_error "unknown" --bogus-option
# more GPUs than StarPU starts: an error, not a run on fewer or on the CPUs
expect_error "64 GPU(s) asked for\|64 CUDA worker(s) requested" --gpus 64
expect_error "tok" --tile-tok 5
expect_error "query" --tile-q 65
expect_error "batch\|maxT" -T 100
# training states are validated field by field (header at offset 40: step,
# 44: padding, 64: sampler state)
cp "$work/state.bin" "$work/trail.bin"; printf 'x' >> "$work/trail.bin"
expect_error "trailing" --resume "$work/trail.bin"
cp "$work/state.bin" "$work/neg.bin"; printf '\373\377\377\377' | dd of="$work/neg.bin" bs=1 seek=40 conv=notrunc 2> /dev/null
expect_error "corrupt header (step -5" --resume "$work/neg.bin"
cp "$work/state.bin" "$work/rng.bin"; dd if=/dev/zero of="$work/rng.bin" bs=1 seek=64 count=8 conv=notrunc 2> /dev/null
expect_error "sampler state zero" --resume "$work/rng.bin"
expect_error "another training file" --resume "$work/state.bin" \
    --train "${TSR_TEST_DATA:-$(dirname "$exe")/../../../algorithms/gpt2/data}/tiny_shakespeare_val.bin"
expect_error "scheduler 'nope'" --sched nope
[ -w /dev/full ] && expect_error "not a regular file" --csv /dev/full
# a CSV that stops taking lines mid-run (a file size limit of 1 KiB; the
# output goes through a pipe, which the limit does not cover): the run says
# so and fails (one process: under mpirun the limit also binds mpirun's own
# files)
if [ ${#launch[@]} -eq 0 ]; then
    ( ulimit -f 1; trap '' XFSZ; run --steps 40 --csv "$work/limited.csv" ) 2>&1 | cat > "$work/e.log"
    rc=${PIPESTATUS[0]}
    [ $rc -eq 1 ] && grep -q "cannot write --csv" "$work/e.log" && ok ||
        bad "--csv past a size limit: exit $rc: $(tail -3 "$work/e.log")"
fi
expect_error "pws" --pws 64
expect_error "gpus" --gpus -1
expect_error "save-every needs" --save-every 2
expect_error "sample-len" --sample-len 65
expect_error "load and --resume" --load "$work/bad.bin" --resume "$work/state.bin"
# output files: never replace a device, FIFO or directory; a symlink's target
# is written (the link stays); a bad path is found before training; a FIFO
# without a writer is refused, not waited on
mkfifo "$work/fifo"
expect_error "not a regular file" --load "$work/fifo"
expect_error "not a regular file" --resume "$work/fifo"
if [ -c /dev/full ] && [ -w /dev/full ]; then
    expect_error "not a regular file" --save /dev/full
    [ -c /dev/full ] && ok || bad "--save /dev/full replaced the device"
fi
expect_error "not a regular file" --write-checkpoint "$work"
run --steps 30 --write-checkpoint "$work/no/such/dir/x.bin" > "$work/early.log" 2>&1
grep -q "cannot create" "$work/early.log" && ! grep -q "^step" "$work/early.log" && ok ||
    bad "a bad --write-checkpoint path was not found before training: $(tail -2 "$work/early.log")"
: > "$work/target.bin"; ln -sf target.bin "$work/link.bin"
run --steps 1 --save "$work/link.bin" --quiet > /dev/null 2>&1
[ -L "$work/link.bin" ] && [ -s "$work/target.bin" ] && ok || bad "--save through a symlink: $(ls -l "$work" | grep -E 'link|target')"
# SIGTERM (a batch scheduler's warning) saves the state like Ctrl-C, exit 143
if [ ${#launch[@]} -eq 0 ]; then
    rm -f "$work/term.bin"
    "$exe" --val-every 0 --sample-every 0 --steps 100000 --save "$work/term.bin" > "$work/term.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do grep -q "^step 2:" "$work/term.log" && break; sleep 0.5; done
    kill -TERM $pid; wait $pid; rc=$?
    kill -KILL $pid 2> /dev/null
    [ $rc -eq 143 ] && [ -s "$work/term.bin" ] && grep -q "Terminated" "$work/term.log" && ok ||
        bad "SIGTERM: exit $rc, state $(ls -l "$work/term.bin" 2>&1)"
fi

# --profile: what each rank holds and sends; under mpirun the training state
# is sharded (each of 2 ranks holds half of the parameters and AdamW state,
# within a tile, and sends and receives each step)
run --steps 5 --profile --quiet > "$work/ranks.log" 2>&1
if [ ${#launch[@]} -gt 0 ]; then
    awk '/^rank [0-9]+ holds/ { n++; p[$2] = $4; if ($0 ~ /a steady step: [0-9.]+ MB sent, [0-9.]+ MB received/) c++ }
         END { exit !(n == 2 && c == 2 && p[0] > 0 && p[1] > 0 && p[0] < 0.51 * (p[0] + p[1]) && p[1] < 0.51 * (p[0] + p[1])) }' "$work/ranks.log" &&
        ok || bad "--profile under mpirun: the state is not shared out: $(grep -n 'rank [0-9]* holds' "$work/ranks.log")"
    # rank 0 prints every rank's schedule summary, in rank order, so that
    # their lines do not interleave under mpirun
    [ "$(grep -o '^schedule (rank [0-9]*)' "$work/ranks.log" | tr '\n' ' ')" = "schedule (rank 0) schedule (rank 1) " ] &&
        ok || bad "--profile under mpirun: schedule reports not in rank order: $(grep -n '^schedule' "$work/ranks.log")"
else
    grep -q "^rank 0 holds [0-9.]* MB of parameters, [0-9.]* MB of AdamW state" "$work/ranks.log" && ok ||
        bad "--profile: no rank line: $(tail -2 "$work/ranks.log")"
fi

# Ranks with worker groups (CPU ones here, GPUs on a GPU node) keep the
# parameters they receive from the forward to the backward: together they
# receive a step at least half the parameters' bytes less than ranks without
# groups, with the same sub-batches (one copy of the other rank's
# parameters less; the partial gradients' bytes vary a little from run to
# run); the losses stay llm.c's
if [ ${#launch[@]} -gt 0 ]; then
    for g in 0 1; do
        TSR_CPU_WORKER_GROUPS=$g STARPU_NCPU=2 run --steps 10 --sub-batches 4 --profile --csv "$work/keep$g.csv" \
            > "$work/keep$g.log" 2>&1 || bad "TSR_CPU_WORKER_GROUPS=$g: run exited $?"
    done
    received() { sed -n 's/^rank [0-9]* holds \([0-9.]*\) MB of parameters.*MB sent, \([0-9.]*\) MB received.*/\1 \2/p' "$1"; }
    if received "$work/keep0.log" | awk -v keep="$(received "$work/keep1.log" | awk '{ r += $2 } END { print r }')" \
        '{ p += $1; r += $2; n++ } END { exit !(n == 2 && keep > 0 && keep <= r - 0.5 * p) }'; then ok
    else bad "worker groups on 2 ranks: the received parameters are not kept for the backward: $(grep -h '^rank' "$work"/keep?.log)"; fi
    same_losses "$work/keep1.csv" && ok ||
        bad "worker groups on 2 ranks: losses differ from llm.c: got [$(losses_of "$work/keep1.csv")] want [$want]"
fi

# Several submitting threads (TSR_SUBMIT_THREADS, default 2): a layer of
# the sub-batches on a rank submitted by one thread per sub-batch gives the
# losses of one thread submitting them in turn, bit for bit in the printed
# digits, and the model line says how many threads submitted
threads_line() { sed -n 's/^model:.*sub-batch(es), submitted by \([0-9]*\) thread(s).*/\1/p' "$1"; }
for t in 1 default 4; do
    if [ "$t" = default ]; then unset TSR_SUBMIT_THREADS; else export TSR_SUBMIT_THREADS=$t; fi
    TSR_CPU_WORKER_GROUPS=1 STARPU_NCPU=2 run --steps 4 --sub-batches 4 > "$work/streams$t.log" 2>&1 ||
        bad "TSR_SUBMIT_THREADS=$t: run exited $?"
done
unset TSR_SUBMIT_THREADS
want_threads="1 2 4"; [ ${#launch[@]} -gt 0 ] && want_threads="1 2 2" # 2 sub-batches a rank
got_threads="$(threads_line "$work/streams1.log") $(threads_line "$work/streamsdefault.log")"
got_threads="$got_threads $(threads_line "$work/streams4.log")"
[ "$got_threads" = "$want_threads" ] && ok ||
    bad "TSR_SUBMIT_THREADS 1, unset, 4: the model line says $got_threads threads, not $want_threads"
step_losses() { sed -n 's/^step \([0-9]*\): train loss \([0-9.]*\).*/\1 \2/p' "$1"; }
[ "$(step_losses "$work/streams1.log" | wc -l)" = 4 ] &&
    [ "$(step_losses "$work/streams1.log")" = "$(step_losses "$work/streamsdefault.log")" ] &&
    [ "$(step_losses "$work/streams1.log")" = "$(step_losses "$work/streams4.log")" ] && ok ||
    bad "TSR_SUBMIT_THREADS 1, unset and 4 give other losses: [$(step_losses "$work/streams1.log" | tr '\n' ' ')]," \
        "[$(step_losses "$work/streamsdefault.log" | tr '\n' ' ')] and [$(step_losses "$work/streams4.log" | tr '\n' ' ')]"

# --trace FILE.png: the Gantt chart (steps marked), the task list and the
# schedule summary; --profile: the summary alone
# (schedule, or schedule.rank0 under mpirun)
rm -f "$work"/sched*.png "$work"/sched*.csv
run --steps 3 --trace "$work/sched.png" > "$work/sched.log" 2>&1
stem="$work/sched"; [ ${#launch[@]} -gt 0 ] && stem="$work/sched.rank0"
[ "$(head -c 4 "$stem.png" 2> /dev/null | tail -c 3)" = PNG ] && grep -q "^task,kind,worker" "$stem.csv" &&
    [ "$(grep -c linear_fwd "$stem.csv")" -gt 0 ] && grep -q "schedule.*critical path" "$work/sched.log" &&
    grep -q "verdict:" "$work/sched.log" && ok || bad "--trace FILE.png: $(tail -3 "$work/sched.log")"
run --steps 2 --profile > "$work/profile.log" 2>&1
grep -q "schedule.*critical path" "$work/profile.log" && grep -q "^  adamw " "$work/profile.log" &&
    ! grep -q "steady steps" "$work/profile.log" && ok || bad "--profile: $(tail -3 "$work/profile.log")"
# with 4 steps or more, the operations again over the steady steps
run --steps 5 --profile > "$work/profile5.log" 2>&1
grep -q "steady steps, tasks starting from 'step 2' to 'step 4'" "$work/profile5.log" &&
    [ "$(grep -c "^  linear_fwd " "$work/profile5.log")" -ge 2 ] && ok ||
    bad "--profile, 5 steps: $(grep -A3 "steady" "$work/profile5.log")"
expect_error "must end in .png\|cannot" --trace "$work/no/such/dir/x.png"

# --tiles auto: the model ranks the tiles, a shortlist is tried, the
# prediction and the trial are printed; a second run takes the trials from
# the cache (in a cache of its own: no former run's trials) and picks the
# same, with the same prediction (every calibration cached, the loss's too)
auto_tiles() { sed -n 's/^model:.*; tiles \(tok [^(]*\) (.*/\1/p' "$1"; }
auto_predicted() { sed -n 's/^tiles: --tiles auto predicts \([0-9.]*\) ms.*/\1/p' "$1"; }
TSR_CACHE_DIR="$work/cache" run --steps 2 --tiles auto > "$work/auto.log" 2>&1
grep -q "^tiles: --tiles auto predicts [0-9.]* ms a step (its model); its trial ran [0-9.]* ms a step" \
    "$work/auto.log" && grep -q "tried [2-9] tile sets" "$work/auto.log" && grep -q "^step 1:" "$work/auto.log" &&
    [ -n "$(auto_tiles "$work/auto.log")" ] && ok || bad "--tiles auto: $(tail -3 "$work/auto.log")"
TSR_CACHE_DIR="$work/cache" run --steps 1 --tiles auto > "$work/auto2.log" 2>&1
! grep -q "tried .* tile sets" "$work/auto2.log" && [ "$(auto_tiles "$work/auto2.log")" = "$(auto_tiles "$work/auto.log")" ] &&
    [ -n "$(auto_predicted "$work/auto.log")" ] &&
    [ "$(auto_predicted "$work/auto2.log")" = "$(auto_predicted "$work/auto.log")" ] && ok ||
    bad "--tiles auto again: [$(auto_tiles "$work/auto2.log")] after [$(auto_tiles "$work/auto.log")], predicting" \
        "$(auto_predicted "$work/auto2.log") after $(auto_predicted "$work/auto.log") ms; $(grep "tried" "$work/auto2.log")"
expect_error "chooses every tile" --tiles auto --tile-tok 64
expect_error "only value is auto" --tiles best

# an option error is short: the message and a pointer to --help, not the
# usage (without mpirun, which adds its own report)
if [ ${#launch[@]} -eq 0 ]; then
    run --bogus-option > "$work/short.log" 2>&1
    [ "$(wc -l < "$work/short.log")" -le 3 ] && grep -q -- "--help" "$work/short.log" && ok ||
        bad "option error output is $(wc -l < "$work/short.log") lines"
fi
check_report check_gpt2_driver
