#!/bin/bash
# replay_gpt2_tiles.sh: one CSV row per tile set with positive times; the
# replay on the run's own workers within 25 % of the measured steps (it adds
# the run's runtime cost a task), and not rising with more workers; bad
# options exit 2, a failing run exits 1.
# usage: check_replay_gpt2_tiles.sh SCRIPT TSR_GPT2
set -u
script=$1 exe=$2
fail() { echo "FAIL: $*"; exit 1; }
"$script" --exe "$exe" --steps 4 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--steps 4 did not exit 2"
"$script" --exe "$exe" --bogus 1 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--bogus did not exit 2"
"$script" --exe "$exe" --model d2 --steps 5 --tiles "48:64:256:6288:2" > /dev/null 2>&1
[ $? -eq 1 ] || fail "a token tile that does not divide T did not exit 1"
csv=$("$script" --exe "$exe" --model d2 --steps 6 --tiles "256:64:256:6288:2 64:128:512:12576:4") ||
  fail "the script failed"
echo "$csv"
awk -F, 'NR > 1 { rows++
                  for (i = 10; i <= 17; i++) if (!($i > 0)) bad = bad " field " i ": " $0
                  r = $12 / $17; if (r < 0.75 || r > 1.25) bad = bad " replay/measured " r
                  for (i = 13; i <= 16; i++) if ($i > 1.05 * $(i - 1)) bad = bad " rises " $0 }
         END { if (rows != 2) bad = bad " rows " rows
               if (bad) { print "FAIL:" bad; exit 1 } }' <<<"$csv" || exit 1
echo PASS
