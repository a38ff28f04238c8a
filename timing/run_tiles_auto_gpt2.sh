#!/usr/bin/env bash
# tsr_gpt2 --tiles auto against a tile sweep, measured in the same run:
# steady-state median step (12 steps) of every point of the sweep and of
# --tiles auto (run three times, spread over the sweep: the machine's noise).
# Then the sweep's best point and auto's tiles run again, alternately,
# --rounds times each: the best of 48 noisy points is biased low (on this
# VM one tile set's median step varies by 10-25 % from process to process),
# so the ratio of these alternating reruns' medians is the fair one.
#   timing/run_tiles_auto_gpt2.sh [--model d2] [-B 4] [-T 64] [--threads N | --gpu] [--rounds N] [--build DIR] [--out OUT.csv]
#   sweep: tok 128,256  ch C/2,C  hid 2C,4C  voc Vp/8,Vp/2,Vp  heads NH/2,NH
#   --gpu: the GPU alone (STARPU_NCPU=0), GPU-sized sweep: tok T,2T,4T (within
#          the batch)  ch C/2,C  hid 4C  voc Vp/4,Vp  heads NH/2,NH
set -euo pipefail
cd "$(dirname "$0")/.."
model=d2 B=4 T=64 threads=2 gpu=0 rounds=3 build=build out=timing/results/tiles_auto_gpt2.csv
PROG=run_tiles_auto_gpt2.sh
# shellcheck source=lib/args.sh
. timing/lib/args.sh
usage="usage: $0 [--model d2|124M] [-B N] [-T N] [--threads N | --gpu] [--rounds N] [--build DIR] [--out OUT.csv]"
while [ $# -gt 0 ]; do
  case $1 in
    --gpu) gpu=1; shift; continue ;;
    -h|--help) echo "$usage"; exit 0 ;;
    --model|-B|-T|--threads|--rounds|--build|--out) need_value "$1" $# ;;
    *) arg_error "unknown option '$(shown "$1")' ($usage)" ;;
  esac
  case $1 in
    --model) check_word --model "$2" d2 124M; model=$2 ;;
    -B) check_count -B "$2" 1 4096; B=$2 ;; -T) check_count -T "$2" 1 1024; T=$2 ;;
    --threads) check_count --threads "$2" 1 4096; threads=$2 ;; --rounds) check_count --rounds "$2" 0 1000; rounds=$2 ;;
    --build) check_path --build "$2"; build=$2 ;; --out) check_path --out "$2"; out=$2 ;;
  esac
  shift 2
done
exe=$build/algorithms/gpt2/tsr_gpt2
[ -x "$exe" ] || { echo "missing $(shown "$exe") (build it first)" >&2; exit 1; }
case $model in
  d2) C=128 NH=4 ;; 124M) C=768 NH=12 ;;
esac
Vp=50304
workers=(--threads "$threads")
if [ $gpu = 1 ]; then workers=(); export STARPU_NCPU=0; fi
step() { # prints the steady median step in ms and the tiles line
  "$exe" --model "$model" -B "$B" -T "$T" "${workers[@]}" --steps 12 --val-every 0 --sample-every 0 --quiet "$@" 2>&1 |
    awk '/^model:/ { sub(/.*tiles /, ""); sub(/ \(.*/, ""); tiles = $0 }
         /^summary:/ { sub(/.*median step /, ""); sub(/ ms.*/, ""); ms = $0 }
         END { print ms "," tiles }'
}
echo "tiles,median_step_ms,tok_ch_hid_voc_heads" > "$out"
n=0
toks="128 256" hids="$((2 * C)) $((4 * C))" vocs="$(((Vp + 7) / 8)) $((Vp / 2)) $Vp"
if [ $gpu = 1 ]; then
  toks=$(for m in 1 2 4; do [ $((m * T)) -le $((B * T)) ] && echo $((m * T)); done)
  hids=$((4 * C)) vocs="$(((Vp + 3) / 4)) $Vp"
fi
every=$([ $gpu = 1 ] && echo 8 || echo 16)   # --tiles auto amid the sweep, 3 times
for tok in $toks; do for ch in $((C / 2)) $C; do for hid in $hids; do
  for voc in $vocs; do for heads in $((NH / 2)) $NH; do
    echo "sweep,$(step --tile-tok "$tok" --tile-ch "$ch" --tile-hid "$hid" --tile-voc "$voc" --tile-heads "$heads")" >> "$out"
    n=$((n + 1))
    if [ $((n % every)) -eq 0 ]; then echo "auto,$(step --tiles auto)" >> "$out"; fi
done; done; done; done; done
# the sweep's best point and auto, alternately
best_tiles=$(awk -F, '$1 == "sweep" && (best == "" || $2 < best) { best = $2; bt = $3 } END { print bt }' "$out")
read -r _ tok _ ch _ hid _ voc _ heads _ <<< "$best_tiles"
for _ in $(seq "$rounds"); do
  echo "rerun-best,$(step --tile-tok "$tok" --tile-ch "$ch" --tile-hid "$hid" --tile-voc "$voc" --tile-heads "$heads")" >> "$out"
  echo "rerun-auto,$(step --tiles auto)" >> "$out"
done
# the comparisons (timing/auto_vs_best.awk, in seconds)
cases() { # cases KIND_MANUAL KIND_AUTO
  awk -F, -v m="$1" -v a="$2" -v c="$model B$B T$T" '$1 == m || $1 == a {
    print c "," $3 "," ($1 == m ? "manual" : "auto") "," $2 / 1000 ",nan" }' "$out"
}
cases sweep auto | awk -F, -f timing/auto_vs_best.awk
echo "alternating reruns, $rounds each (medians):"
cases rerun-best rerun-auto | awk -F, -v rerun=1 -f timing/auto_vs_best.awk
