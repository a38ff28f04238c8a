# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # the variables are the caller's
# timing/lib/tiles_auto.sh: the skeleton of run_tiles_auto_gemm.sh and
# run_tiles_auto_attention.sh (sourced, from the repository's root). The
# script sets
#   exe_name     its program under BUILD (timing/time_gemm ...)
#   out          the default OUT.csv
#   usage        its usage line
# and defines
#   run ARGS...        one run of the program (the options below are set)
#   sweep              the sweep's CSV on stdout (header first)
#   cases FILE         FILE's rows as auto_vs_best.awk's input
#   best_points FILE   one line a case: the best sweep point's words
#   rerun_point WORDS  one run of that point and one of --tiles auto, no header
#   extra_option OPTION VALUE   (optional) its own options: 0 when taken
# then calls tiles_auto_main "$@".
# shellcheck source=args.sh
. timing/lib/args.sh

threads=2 niter=3 rounds=3 build=build
extra_option() { return 1; }

tiles_auto_help() { echo "$usage"; }
tiles_auto_option() {
  case $1 in
    --threads) check_count --threads "$2" 1 4096; threads=$2 ;;
    --niter) check_count --niter "$2" 1 1000; niter=$2 ;;
    --rounds) check_count --rounds "$2" 0 1000; rounds=$2 ;;
    --build) check_path --build "$2"; build=$2 ;;
    --out) check_path --out "$2"; out=$2 ;;
    *) extra_option "$1" "$2" ;;
  esac
}

tiles_auto_main() {
  take_options tiles_auto_option tiles_auto_help "($usage)" "" "$@"
  shift "$options_taken"
  [ $# -eq 0 ] || arg_error "$usage"
  exe=$build/$exe_name
  [ -x "$exe" ] || { echo "missing $(shown "$exe") (build it first)" >&2; exit 1; }
  sweep > "$out"
  # per case: the best manual point, the auto point (the median of its runs), their ratio
  cases "$out" | awk -F, -f timing/auto_vs_best.awk
  [ "$rounds" -gt 0 ] || exit 0
  # the alternating reruns: each case's best sweep point against auto
  local rerun=${out%.csv}_rerun.csv best point
  best=$(best_points "$out")
  {
    head -n 1 "$out"
    for _ in $(seq "$rounds"); do
      while read -r -a point; do
        rerun_point "${point[@]}"
      done <<< "$best"
    done
  } > "$rerun"
  echo "alternating reruns, $rounds each (medians):"
  cases "$rerun" | awk -F, -v rerun=1 -f timing/auto_vs_best.awk
}
