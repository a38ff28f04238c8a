#!/usr/bin/env bash
# time_gpt2_memory.sh: what each MPI rank of tsr_gpt2 holds (--profile's
# owned bytes, the peaks of its transient kinds, its peak RSS), the median
# steady step and the final loss, for a baseline build and this one
# alternated at each rank count, as CSV on stdout (one row per build and rank).
#
#   timing/time_gpt2_memory.sh --base PATH [options]
#     --base PATH       the baseline tsr_gpt2 (e.g. a build of main)
#     --exe PATH        this tsr_gpt2 (default build/algorithms/gpt2/tsr_gpt2)
#     --ranks "N ..."   rank counts (default "1 2 4 8"; -B must divide by each)
#     --model NAME      preset (default 124M)   -B N (default 8)   -T N (default 64)
#     --steps N         (default 3)
# Ranks beyond the cores oversubscribe them (one worker a rank): slow, but
# what a rank holds does not depend on it.
set -euo pipefail
exe=build/algorithms/gpt2/tsr_gpt2; base=""; ranks="1 2 4 8"; model=124M; B=8; T=64; steps=3
PROG=time_gpt2_memory.sh
# shellcheck source=lib/args.sh
. "$(dirname "$0")/lib/args.sh"
option() {
  case $1 in
    --base) check_path "$1" "$2"; base=$2 ;; --exe) check_path "$1" "$2"; exe=$2 ;;
    --ranks) [[ $2 =~ ^[1-9][0-9]{0,3}( [1-9][0-9]{0,3})*$ ]] || arg_error "--ranks '$(shown "$2")': whole numbers separated by spaces"; ranks=$2 ;;
    --model) check_name "$1" "$2"; model=$2 ;;
    -B) check_count "$1" "$2" 1 100000; B=$2 ;; -T) check_count "$1" "$2" 1 100000; T=$2 ;;
    --steps) check_count "$1" "$2" 3 100000; steps=$2 ;;
  esac
}
take_all_options option help_from_comments "(see --help)" "--base --exe --ranks --model -B -T --steps" "$@"
[ -n "$base" ] || arg_error "--base PATH is required"
for x in "$base" "$exe"; do [ -x "$x" ] || { echo "error: $(shown "$x") not found (build first)" >&2; exit 1; }; done
field() { sed -n "s/.*$1.*/\\1/p" <<< "$2"; }
echo "ranks,build,rank,peak_rss_mb,owned_params_mb,owned_adam_mb,owned_grads_mb,owned_acts_mb,cached_params_mb,partial_grads_mb,other_buffers_mb,median_step_ms,final_loss"
for np in $ranks; do
  for build in base this; do
    x=$exe; [ $build = base ] && x=$base
    out=$(mpirun --allow-run-as-root --oversubscribe -np "$np" "$x" --model "$model" --threads 1 -B "$B" -T "$T" \
          --steps "$steps" --val-every 0 --sample-every 0 --profile 2>&1) || { echo "error: $build on $np ranks failed" >&2; exit 1; }
    step=$(field 'median step \([0-9.]*\) ms' "$out"); loss=$(field 'final train loss \([0-9.]*\);' "$out")
    grep '^rank [0-9]* holds' <<< "$out" | while read -r line; do
      own=$(sed -n 's/.*holds \([0-9.]*\) MB of parameters, \([0-9.]*\) MB of AdamW state, \([0-9.]*\) MB of gradients, \([0-9.]*\) MB of activations.*/\1,\2,\3,\4/p' <<< "$line")
      live=$(sed -n "s/.*at most \([0-9.]*\) MB of other ranks' parameters cached, \([0-9.]*\) MB of its partial gradients, \([0-9.]*\) MB of other buffers.*/\1,\2,\3/p" <<< "$line")
      [ -n "$live" ] || live="$(sed -n "s/.*up to \([0-9.]*\) MB of other ranks' parameters cached.*/\1/p" <<< "$line"),,"
      echo "$np,$build,$(awk '{print $2}' <<< "$line"),$(field 'peak RSS \([0-9.]*\) MB' "$line"),$own,$live,$step,$loss"
    done
  done
done
