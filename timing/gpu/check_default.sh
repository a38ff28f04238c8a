#!/usr/bin/env bash
# check_default.sh: on a GPU node, tsr_gpt2 as a new user starts it (no
# environment at all, a fresh HOME and so a fresh STARPU_HOME each time: a
# first run on a new machine) against the best known explicit configuration
# (the GPU alone, STARPU_NCPU=0, its perf models kept from earlier runs),
# alternated round by round; and the same for time_gemm's runtime line.
# Prints each run's runtime line, wall time (StarPU's bus calibration
# included), first-step and steady median step time, then the ratio of the
# medians and the verdicts against issue 41's bars: the default's steady step
# within 5 % of the explicit one's, its first step under 5 s.
#
#   timing/gpu/check_default.sh [options]
#     --bundle DIR   deps/bundle.sh's output (default bundle)
#     --out DIR      logs, CSVs and check_default.csv (default check_default_out)
#     --rounds N     alternated rounds, 1-20 (default 3)
#     --steps N      steps a run, 3-1000 (default 12)
#     -B N -T N      batch and sequence (default 8 and 1024)
#     --model NAME   (default 124M)
#     --alt          also time the GPU alone under lws (no performance model at all)
#     --cpus-too     also, in the first round, every core but one as CPU workers
#                    beside the GPU (--threads), with a fresh HOME
# Exits 1 when a bar is missed or a run fails, 77 without an NVIDIA GPU.
set -uo pipefail
bundle=bundle out=check_default_out rounds=3 steps=12 B=8 T=1024 model=124M alt=0 cpus_too=0
here=$(cd "$(dirname "$0")/.." && pwd)
PROG=check_default.sh
# shellcheck source=../lib/args.sh
. "$here/lib/args.sh"
while [ $# -gt 0 ]; do
  case $1 in
    --bundle|--out|--rounds|--steps|-B|-T|--model) need_value "$1" $# ;;
  esac
  case $1 in
    --bundle) check_path "$1" "$2"; bundle=$2; shift 2 ;;
    --out) check_path "$1" "$2"; out=$2; shift 2 ;;
    --rounds) check_count "$1" "$2" 1 20; rounds=$2; shift 2 ;;
    --steps) check_count "$1" "$2" 3 1000; steps=$2; shift 2 ;;
    -B) check_count "$1" "$2" 1 4096; B=$2; shift 2 ;;
    -T) check_count "$1" "$2" 1 1024; T=$2; shift 2 ;;
    --model) check_word "$1" "$2" d2 124M 350M 774M 1558M; model=$2; shift 2 ;;
    --alt) alt=1; shift ;;
    --cpus-too) cpus_too=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | grep '^#'; exit 0 ;;
    *) arg_error "unknown option '$(shown "$1")' (see --help)" ;;
  esac
done
if ! nvidia-smi -L >/dev/null 2>&1 && [ ! -e /dev/nvidia0 ]; then
  echo "no NVIDIA GPU here: skipped"; exit 77
fi
[ -x "$bundle/bin/tsr_gpt2" ] || arg_error "no $(shown "$bundle")/bin/tsr_gpt2 (run deps/bundle.sh)"
bundle=$(cd "$bundle" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
libs=$bundle/lib:/usr/local/cuda/targets/x86_64-linux/lib
kept_home=$out/explicit_home   # the explicit runs' perf models, kept over the rounds
mkdir -p "$kept_home"
args=(--model "$model" -B "$B" -T "$T" --steps "$steps" --val-every 0 --sample-every 0)
extra=()   # a run's own options

# median: of the numbers on stdin, one a line ("nan" when none)
median() { sort -g | awk '{ v[++n] = $1 } END { if (!n) print "nan"; else if (n % 2) print v[(n + 1) / 2]
  else print (v[n / 2] + v[n / 2 + 1]) / 2 }'; }
# median_of NAME COLUMN: over the rounds, a column (4: first_ms, 5: steady_median_ms) of runs NAME
median_of() { awk -F, -v name="$1" -v c="$2" '$1 == name && $c != "nan" { print $c }' "$out/check_default.csv" | median; }

# run NAME ROUND ENV...: tsr_gpt2 under exactly ENV (env -i), its CSV and log in OUT;
# appends "name,round,wall_s,first_ms,steady_median_ms,tokens_per_ms" to the results
run() {
  local name=$1 round=$2; shift 2
  local base=$out/${name}_$round t0 t1
  rm -f "$base.csv"
  t0=$(date +%s.%N)
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$libs" "$@" timeout 600 "$bundle/bin/tsr_gpt2" "${args[@]}" "${extra[@]}" \
    --csv "$base.csv" > "$base.log" 2>&1
  local rc=$?
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ] || [ ! -s "$base.csv" ]; then
    echo "FAIL: $name round $round exited $rc ($base.log):"; tail -5 "$base.log"; failed=1; return
  fi
  local first steady
  first=$(awk -F, 'NR > 1 && $1 == 0 { print $3 }' "$base.csv")
  steady=$(awk -F, 'NR > 1 && $6 == "steady" { print $3 }' "$base.csv" | median)
  awk -v name="$name" -v round="$round" -v t0="$t0" -v t1="$t1" -v first="${first:-nan}" -v m="$steady" \
      -v bt=$((B * T)) 'BEGIN { printf "%s,%s,%.2f,%s,%s,%s\n", name, round, t1 - t0, first, m,
                              m == "nan" ? "nan" : sprintf("%.2f", bt / m) }' \
    | tee -a "$out/check_default.csv"
  grep -m1 '^runtime:' "$base.log" | cut -c1-400 | sed 's/^/    /'
}

failed=0
echo "name,round,wall_s,first_ms,steady_median_ms,tokens_per_ms" > "$out/check_default.csv"
echo "== $model B$B T$T, $steps steps, $rounds rounds alternated: default (fresh HOME) / explicit GPU alone"
for r in $(seq 1 "$rounds"); do
  fresh=$(mktemp -d "$out/fresh_home.XXXXXX")   # a new machine: no ~/.starpu, no tile models
  run default "$r" HOME="$fresh"
  run explicit "$r" HOME="$kept_home" STARPU_HOME="$kept_home/starpu" STARPU_NCPU=0 STARPU_SCHED=dmdas
  [ $alt = 1 ] && run gpu_lws "$r" HOME="$kept_home" STARPU_HOME="$kept_home/starpu" STARPU_NCPU=0 STARPU_SCHED=lws
  rm -rf -- "$fresh"
  if [ $cpus_too = 1 ] && [ "$r" = 1 ]; then
    fresh=$(mktemp -d "$out/fresh_home.XXXXXX")
    cores=$(nproc)
    extra=(--threads $((cores > 1 ? cores - 1 : 1)))
    run cpus_and_gpu "$r" HOME="$fresh"
    extra=()
    rm -rf -- "$fresh"
  fi
done

d=$(median_of default 5) e=$(median_of explicit 5) f=$(median_of default 4)
ratio=$(awk -v d="$d" -v e="$e" 'BEGIN { if (d == "nan" || e == "nan") print "nan"; else printf "%.3f", d / e }')
echo "default steady median $d ms, explicit GPU alone $e ms: ratio $ratio (bar <= 1.05)"
echo "default first step (median over rounds, fresh HOME): $f ms (bar < 5000)"
[ $alt = 1 ] && echo "GPU alone under lws: $(median_of gpu_lws 5) ms steady, first $(median_of gpu_lws 4) ms"
[ $cpus_too = 1 ] && echo "CPU workers beside the GPU (fresh HOME): $(median_of cpus_and_gpu 5) ms steady, first $(median_of cpus_and_gpu 4) ms"
grep -q 'GPU only' "$out"/default_1.log || { echo "FAIL: the default's runtime line does not say 'GPU only'"; failed=1; }
awk -v r="$ratio" 'BEGIN { exit !(r != "nan" && r <= 1.05) }' || { echo "FAIL: default steady step over 1.05x"; failed=1; }
awk -v f="$f" 'BEGIN { exit !(f != "nan" && f < 5000) }' || { echo "FAIL: default first step over 5 s"; failed=1; }

# the timing programs share tsr_init's choice: time_gemm's runtime line, no environment
if [ -x "$bundle/bin/time_gemm" ]; then
  fresh=$(mktemp -d "$out/fresh_home.XXXXXX")
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$libs" HOME="$fresh" timeout 300 "$bundle/bin/time_gemm" --m 4096 \
    --n 4096 --k 4096 --tile 4096 --mode ordered --niter 3 > "$out/time_gemm.csv" 2> "$out/time_gemm.log"
  echo "time_gemm (exit $?): $(grep -m1 'runtime\|workers' "$out/time_gemm.log" | cut -c1-300)"
  grep -q 'GPU only' "$out/time_gemm.log" || { echo "FAIL: time_gemm's runtime line does not say 'GPU only'"; failed=1; }
  tail -1 "$out/time_gemm.csv"
  rm -rf -- "$fresh"
fi
[ $failed = 0 ] && echo "PASS: the default is the GPU alone, within the bars"
exit $failed
