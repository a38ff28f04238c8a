#!/usr/bin/env bash
# replay_gpt2_tiles.sh: for each tile set, one tsr_gpt2 run with --profile on
# this machine's workers, and the schedule summary's replay of its steady
# steps on 1, 2, 4, 8 and 16 times as many workers (measured task times plus
# the run's runtime cost a task; no memory contention: a projection, not a
# measurement). CSV on stdout, times per step in ms.
#
#   timing/replay_gpt2_tiles.sh [options]
#     --exe PATH      tsr_gpt2 (default build/algorithms/gpt2/tsr_gpt2)
#     --model NAME    preset (default 124M)     -B N, -T N (default 4, 64)
#     --steps N       steps a run, at least 5 (default 12; the replay covers steps 2..N-2)
#     --tiles "tok:ch:hid:voc:heads ..."  tile sets (default: the CPU defaults
#                     for 2, 4, 8 and 16 workers of 124M B4 T64, and three more)
set -euo pipefail
exe=build/algorithms/gpt2/tsr_gpt2; model=124M; B=4; T=64; steps=12
tiles="256:384:1536:6288:6 128:384:1536:6288:6 128:192:768:3144:3 64:192:768:3144:3 256:128:512:2096:2 64:384:1536:6288:6"
PROG=replay_gpt2_tiles.sh
# shellcheck source=lib/args.sh
. "$(dirname "$0")/lib/args.sh"
option() {
  case $1 in
    --exe) check_path "$1" "$2"; exe=$2 ;; --model) check_name "$1" "$2"; model=$2 ;;
    -B) check_count -B "$2" 1 65536; B=$2 ;; -T) check_count -T "$2" 1 65536; T=$2 ;;
    --steps) check_count --steps "$2" 5 100000; steps=$2 ;;
    --tiles) n='[1-9][0-9]{0,6}' t="$n:$n:$n:$n:$n"
             [[ $2 =~ ^$t( $t)*$ ]] || arg_error "--tiles '$(shown "$2")': tok:ch:hid:voc:heads sets of whole numbers, separated by spaces"
             tiles=$2 ;;
  esac
}
take_all_options option help_from_comments "(see --help)" "--exe --model -B -T --steps --tiles" "$@"
[ -x "$exe" ] || { echo "error: $(shown "$exe") not found (build first)" >&2; exit 1; }
echo "model,B,T,tok,ch,hid,voc,heads,workers,median_ms,task_cost_us,replay_1x,replay_2x,replay_4x,replay_8x,replay_16x,measured_ms_per_step"
for t in $tiles; do
  IFS=: read -r tok ch hid voc heads <<< "$t"
  out=$("$exe" --model "$model" -B "$B" -T "$T" --steps "$steps" --val-every 0 --sample-every 0 --profile \
        --tile-tok "$tok" --tile-ch "$ch" --tile-hid "$hid" --tile-voc "$voc" --tile-heads "$heads" 2>&1) ||
    { echo "error: tsr_gpt2 failed for tiles $t:" >&2; tail -3 <<< "$out" >&2; exit 1; }
  line=$(grep 'replay of these steps' <<< "$out" || true)
  [ -n "$line" ] || { echo "error: no replay line for tiles $t (a run of one process on CPU workers only?)" >&2; exit 1; }
  # the steady window spans steps 2 .. steps-2: steps-3 steps
  python3 - "$line" "$((steps - 3))" "$model,$B,$T,$tok,$ch,$hid,$voc,$heads" \
      "$(sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' <<< "$out")" <<'EOF'
import re, sys
line, nsteps, prefix, median = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cost = re.search(r'and ([\d.]+) us of runtime cost', line).group(1)
m = re.search(r'(\d+) workers ([\d.]+) ms \(measured ([\d.]+) ms\)', line)
rest = [float(x) for x in re.findall(r', \d+: ([\d.]+) ms', line)]
per = [float(m.group(2)) / nsteps] + [x / nsteps for x in rest]
print(f"{prefix},{m.group(1)},{median},{cost}," + ",".join(f"{x:.1f}" for x in per) + f",{float(m.group(3)) / nsteps:.1f}")
EOF
done
