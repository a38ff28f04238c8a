#!/usr/bin/env bash
# time_gpt2_vs_reference.sh: tsr_gpt2 and a reference trainer (llm.c's
# train_gpt2_fp32.cu or train_gpt2.c, given by its command line) side by side
# on the same batch shape: median ms a step, tokens/ms, peak GPU memory, first
# and last losses, the first step's time (step0_ms); CSV + PNG, and Tessera's
# speed as a ratio to the reference's measured in the same run.
#
#   timing/time_gpt2_vs_reference.sh --reference "CMD ARGS" --ref-dir DIR [options]
#     --reference CMD   the reference trainer's command line, run in --ref-dir (split
#                       into words at blanks; no quotes, globs or other shell syntax); its
#                       step lines are llm.c's: "step N[/M]: train loss X (took Y ms)"
#                       or "(Y ms, Z tok/s)". It is stopped after --steps steps (llm.c's
#                       CUDA trainer runs a whole epoch). For llm.c: build it, put
#                       gpt2_124M.bin (e.g. tsr_gpt2 --model 124M --steps 0
#                       --write-checkpoint gpt2_124M.bin, llm.c's seed-42 init),
#                       gpt2_tokenizer.bin and the token files in DIR, and give the
#                       same B and T (-b 8 -t 1024 -v 100000 -s 100000)
#     --ref-dir DIR     the reference's working directory (default .)
#     --exe PATH        tsr_gpt2 (default build/algorithms/gpt2/tsr_gpt2)
#     --model NAME -B N -T N --steps N   Tessera's run (defaults 124M 8 1024 20; B and
#                       T 1-65536, steps 3-100000)
#     --tessera-args "..."  more tsr_gpt2 options (e.g. "--gpus 1 --strict-fp32")
#     --out PREFIX      writes PREFIX.csv and PREFIX.png (default gpt2_vs_reference)
# The medians skip each trainer's first step (warm-up) and, for Tessera, the
# steps that fill or drain its pipeline. GPU memory is the peak of
# nvidia-smi's used memory during the run less what was used before it (nan
# without nvidia-smi).
set -euo pipefail
PROG=time_gpt2_vs_reference.sh
# shellcheck source=lib/args.sh
. "$(dirname "$0")/lib/args.sh"
exe=build/algorithms/gpt2/tsr_gpt2; model=124M; B=8; T=1024; steps=20; targs=""
ref=""; refdir=.; out=gpt2_vs_reference
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
    --reference|--ref-dir|--exe|--model|-B|-T|--steps|--tessera-args|--out) need_value "$1" $# ;;
    *) arg_error "unknown option '$(shown "$1")' (see --help)" ;;
  esac
  case $1 in
    --reference) ref=$2 ;; --ref-dir) check_path "$1" "$2"; refdir=$2 ;; --exe) check_path "$1" "$2"; exe=$2 ;;
    --model) check_name "$1" "$2"; model=$2 ;; -B) check_count -B "$2" 1 65536; B=$2 ;;
    -T) check_count -T "$2" 1 65536; T=$2 ;; --steps) check_count --steps "$2" 3 100000; steps=$2 ;;
    --tessera-args) targs=$2 ;; --out) check_path "$1" "$2"; out=$2 ;;
  esac
  shift 2
done
[ -n "$ref" ] || arg_error "--reference CMD is required (see --help)"
[ -x "$exe" ] || arg_error "no tsr_gpt2 at $(shown "$exe") (build first, or --exe)"
[ -d "$refdir" ] || arg_error "--ref-dir '$(shown "$refdir")' is not a directory"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

# Peak GPU memory (MiB above the starting use) while $1 (a pid) runs, into file $2.
watch_gpu() {
  if ! command -v nvidia-smi > /dev/null; then echo nan > "$2"; return; fi
  local base peak=0 now
  base=$(gpu_used)
  while kill -0 "$1" 2>/dev/null; do
    now=$(gpu_used); [ "$now" -gt "$peak" ] && peak=$now
    sleep 0.2
  done
  echo $((peak > base ? peak - base : 0)) > "$2"
}

# Median of the numbers on stdin (nan when none).
median() { sort -g | awk '{ v[n++] = $1 } END { if (!n) print "nan"; else print n % 2 ? v[int(n/2)] : (v[n/2-1] + v[n/2]) / 2 }'; }

# ---- Tessera: its --csv gives each step's time and whether it is steady
read -r -a extra <<< "$targs"
"$exe" --model "$model" -B "$B" -T "$T" --steps "$steps" --val-every 0 --sample-every 0 --quiet \
       --csv "$work/tessera.csv" "${extra[@]}" > "$work/tessera.log" 2>&1 &
pid=$!
watch_gpu $pid "$work/tessera.mem" &
wait $pid || { echo "error: tsr_gpt2 failed:" >&2; tail -5 "$work/tessera.log" >&2; exit 1; }
wait
t_ms=$(awk -F, 'NR > 1 && $6 == "steady" { print $3 }' "$work/tessera.csv" | median)
read -r t_first t_step0 < <(awk -F, 'NR == 2 { print $2, $3 }' "$work/tessera.csv")
t_last=$(awk -F, 'END { print $2 }' "$work/tessera.csv")

# ---- the reference: its step lines, until --steps of them
read -r -a ref_cmd <<< "$ref"   # words, no glob or other expansion
( cd "$refdir" && exec "${ref_cmd[@]}" ) > "$work/ref.log" 2>&1 &
pid=$!
watch_gpu $pid "$work/ref.mem" &
# step lines so far (0 also before the reference's output file exists)
ref_steps() { local n; n=$(grep -c '^step .*train loss' "$work/ref.log" 2> /dev/null); echo "${n:-0}"; }
while kill -0 $pid 2>/dev/null && [ "$(ref_steps)" -lt "$steps" ]; do
  sleep 0.2
done
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
wait
# "step 3: train loss X (took Y ms)" or "step    3/74: train loss X (Y ms, Z tok/s)" -> loss, ms
{ grep '^step .*train loss' "$work/ref.log" || true; } | head -n "$steps" |
  sed -E 's/.*train loss ([-0-9.eE+naif]+) \((took )?([0-9.eE+]+) ms.*/\1 \3/' > "$work/ref.steps"
n=$(wc -l < "$work/ref.steps")
[ "$n" -ge 2 ] || { echo "error: the reference printed $n step line(s):" >&2; tail -5 "$work/ref.log" >&2; exit 1; }
r_ms=$(tail -n +2 "$work/ref.steps" | awk '{ print $2 }' | median)
read -r r_first r_step0 < "$work/ref.steps"
r_last=$(awk 'END { print $1 }' "$work/ref.steps")

# ---- CSV, table, PNG
BT=$((B * T))
tpm() { awk -v bt=$BT -v ms="$1" 'BEGIN { print (ms == "nan" || ms == 0) ? "nan" : bt / ms }'; }
t_tpm=$(tpm "$t_ms"); r_tpm=$(tpm "$r_ms")
ratio=$(awk -v a="$t_tpm" -v b="$r_tpm" 'BEGIN { print (a == "nan" || b == "nan") ? "nan" : sprintf("%.3f", a / b) }')
{
  echo "trainer,model,B,T,steps,median_ms,tokens_per_ms,gpu_mem_mib,loss_first,loss_last,ratio_to_reference,step0_ms"
  echo "tessera,$model,$B,$T,$steps,$t_ms,$t_tpm,$(cat "$work/tessera.mem"),$t_first,$t_last,$ratio,$t_step0"
  echo "reference,$model,$B,$T,$n,$r_ms,$r_tpm,$(cat "$work/ref.mem"),$r_first,$r_last,1,$r_step0"
} > "$out.csv"
awk -F, '{ line = ""; for (i = 1; i <= NF; i++) line = line sprintf("%-15s", $i); print line }' "$out.csv"
echo "tessera / reference: ${ratio}x the tokens/ms (B $B, T $T; $(grep '^runtime:' "$work/tessera.log" | cut -c1-120))"
if command -v gnuplot > /dev/null; then
  # the script is a constant: the CSV, the PNG and the title are its
  # arguments (ARG1 ...), and gnuplot draws into a temporary of ours
  cat > "$work/plot.gp" <<'EOF'
set terminal pngcairo size 640,420 noenhanced
set output ARG2
set datafile separator ","
set style data histograms
set style fill solid 0.7 border -1
set boxwidth 0.6
set yrange [0:*]
set ylabel "tokens/ms (higher is better)"
set title ARG3
plot ARG1 every ::1 using 7:xtic(1) notitle
EOF
  cp "$out.csv" "$work/plot.csv"
  if gnuplot -c "$work/plot.gp" "$work/plot.csv" "$work/plot.png" \
       "GPT-2 $model training, B $B T $T: tessera / reference = ${ratio}x" && cat "$work/plot.png" > "$out.png"; then
    echo "wrote $out.csv and $out.png"
  else
    echo "error: gnuplot could not draw $out.png" >&2; exit 1
  fi
else
  echo "wrote $out.csv (no gnuplot: no PNG)"
fi
