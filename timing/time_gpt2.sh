#!/usr/bin/env bash
# time_gpt2.sh: tokens/ms of tsr_gpt2 training steps over batch shapes, tile
# sizes and DP x TP splits of the cores (MPI ranks x parallel-worker size),
# as CSV on stdout (median of the steady steps: neither filling nor draining the pipeline).
#
#   timing/time_gpt2.sh [options]
#     --exe PATH        tsr_gpt2 (default build/algorithms/gpt2/tsr_gpt2)
#     --model NAME      preset (default d2)
#     --bt "B:T ..."    batch shapes (default "4:64 8:64 16:64 32:64 64:64", B*T 256..4096)
#     --tok "N ..."     token tiles                   --voc "N ..."  vocab tiles
#     --ch "N ..."      channel tiles                 --hid "N ..."  hidden tiles
#     --heads "N ..."   heads per attention tile      --qk "Q:K ..." attention query:key tiles
#                       (each list defaults to the driver's default; 0 = default)
#     --split "R:W:P:S ..."  ranks:workers-per-rank:pws:sub-batches (S 0: the
#                       driver's default, one sub-batch per rank)
#                       (default "1:2:1:1 1:2:1:2 1:2:2:1 2:1:1:0": task parallelism,
#                       2 sub-batches, 2-core parallel workers, 2 MPI ranks)
#     --accum "ordered redux"   --steps N (default 6)
# Plot: timing/plot_csv.sh out.csv out.png B_T tokens_per_ms split
set -euo pipefail
exe=build/algorithms/gpt2/tsr_gpt2; model=d2; bts="4:64 8:64 16:64 32:64 64:64"
toks=""; vocs=""; chs=""; hids=""; headss=""; qks=""; splits="1:2:1:1 1:2:1:2 1:2:2:1 2:1:1:0"; accums="ordered"; steps=6
PROG=time_gpt2.sh
# shellcheck source=lib/args.sh
. "$(dirname "$0")/lib/args.sh"
# check_words OPTION VALUE PATTERN WHAT: VALUE is words separated by single
# spaces, each matching the extended regular expression PATTERN
check_words() {
  [[ $2 =~ ^$3( $3)*$ ]] || arg_error "$1 '$(shown "$2")': $4, separated by spaces"
}
n='(0|[1-9][0-9]{0,6})'
option() {
  case $1 in
    --exe) check_path "$1" "$2"; exe=$2 ;; --model) check_name "$1" "$2"; model=$2 ;;
    --bt) check_words "$1" "$2" "$n:$n" "B:T pairs of whole numbers"; bts=$2 ;;
    --tok) check_words "$1" "$2" "$n" "whole numbers"; toks=$2 ;;
    --voc) check_words "$1" "$2" "$n" "whole numbers"; vocs=$2 ;;
    --ch) check_words "$1" "$2" "$n" "whole numbers"; chs=$2 ;;
    --hid) check_words "$1" "$2" "$n" "whole numbers"; hids=$2 ;;
    --heads) check_words "$1" "$2" "$n" "whole numbers"; headss=$2 ;;
    --qk) check_words "$1" "$2" "$n:$n" "Q:K pairs of whole numbers"; qks=$2 ;;
    --split) check_words "$1" "$2" "$n:$n:$n(:$n)?" "R:W:P[:S] whole numbers"; splits=$2 ;;
    --accum) check_words "$1" "$2" "(ordered|redux)" "ordered or redux"; accums=$2 ;;
    --steps) check_count "$1" "$2" 1 100000; steps=$2 ;;
  esac
}
take_all_options option help_from_comments "(see --help)" "--exe --model --bt --tok --voc --ch --hid --heads --qk --split --accum --steps" "$@"
[ -x "$exe" ] || { echo "error: $(shown "$exe") not found (build first)" >&2; exit 1; }
echo "model,B,T,B_T,tok,ch,hid,voc,heads,q,k,accum,split,ranks,workers,pws,subbatches,median_ms,tokens_per_ms,mean_tokens_per_ms,peak_rss_mb"
for bt in $bts; do
  B=${bt%%:*}; T=${bt##*:}
  for tok in ${toks:-0}; do for voc in ${vocs:-0}; do for ch in ${chs:-0}; do for hid in ${hids:-0}; do
  for heads in ${headss:-0}; do for qk in ${qks:-0:0}; do for accum in $accums; do for split in $splits; do
    q=${qk%%:*}; k=${qk##*:}
    IFS=: read -r ranks workers pws nsub <<< "$split"
    nsub=${nsub:-0}
    args=(--model "$model" -B "$B" -T "$T" --steps "$steps" --val-every 0 --sample-every 0 --quiet
          --threads "$workers" --pws "$pws")
    [ "$nsub" != 0 ] && args+=(--sub-batches "$nsub")
    [ "$tok" != 0 ] && args+=(--tile-tok "$tok")
    [ "$heads" != 0 ] && args+=(--tile-heads "$heads")
    [ "$q" != 0 ] && args+=(--tile-q "$q")
    [ "$k" != 0 ] && args+=(--tile-k "$k")
    [ "$voc" != 0 ] && args+=(--tile-voc "$voc")
    [ "$ch" != 0 ] && args+=(--tile-ch "$ch")
    [ "$hid" != 0 ] && args+=(--tile-hid "$hid")
    [ "$accum" = redux ] && args+=(--redux)
    launch=()
    [ "$ranks" -gt 1 ] && launch=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
    line=$("${launch[@]}" "$exe" "${args[@]}" 2>/dev/null | grep '^summary:' || true)
    ms=$(sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p' <<< "$line")
    tpm=$(sed -n 's/.*ms, \([0-9.]*\) tokens\/ms.*/\1/p' <<< "$line")
    mean=$(sed -n 's/.*(mean \([0-9.]*\)).*/\1/p' <<< "$line")
    rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MB.*/\1/p' <<< "$line")
    [ -n "$ms" ] || { ms=nan; tpm=nan; mean=nan; rss=nan; }
    echo "$model,$B,$T,$((B * T)),$tok,$ch,$hid,$voc,$heads,$q,$k,$accum,$split,$ranks,$workers,$pws,$nsub,$ms,$tpm,$mean,$rss"
  done; done; done; done; done; done; done; done
done
