#!/usr/bin/env bash
# gpu_node.sh: GPT-2 on a GPU node, from a bundle (deps/bundle.sh): the GPU
# tests, correctness against the CPU run and llm.c, residency, speed against
# llm.c's CUDA trainers, several GPU workers, and the node's CPU cores.
# Each stage writes its logs and CSVs into OUT and prints a short verdict.
#
#   timing/gpu_node.sh [options] STAGE...
#     --bundle DIR   deps/bundle.sh's output (default bundle)
#     --mpi-bundle DIR  deps/bundle_mpi.sh's output beside it, for mpi2 (default bundle-mpi)
#     --build DIR    the CMake build the bundle came from, for ctest (default build-device)
#     --llmc DIR     llm.c's trainers, built beforehand: DIR/train_gpt2fp32cu,
#                    DIR/train_gpt2cu, DIR/gpt2_tokenizer.bin and
#                    DIR/dev/data/tinyshakespeare/*.bin (default bundle-llmc/run)
#     --llmc-src DIR an llm.c checkout (train_gpt2.c, llmc/) and a cblas.h, for the
#                    cpu16 stage's llm.c + BLIS (default bundle-llmc/src)
#     --out DIR      results (default gpu_node_out)
#     --steps N      steps of the timed runs, 3-10000 (default 20)
#     --sizes LIST   the speed and bf16 stages' B,T pairs (default "4,64 8,1024 16,1024")
#   stages:
#     tests      ctest -L gpu (every test's CUDA workers must run tasks)
#     correct    124M B4 T64, 10 steps: CPU, GPU --strict-fp32, GPU TF32, llm.c fp32
#     residency  host <-> GPU bytes a steady step (tsr_gpt2 --profile), B4 T64 and B8 T1024
#     profile    where a step goes (tsr_gpt2 --profile), 124M B8 T1024, fp32 (TF32) and bf16
#     speed      tsr_gpt2 against llm.c train_gpt2_fp32.cu: B4 T64, B8 T1024, B16 T1024
#     bf16       llm.c's bf16 trainer (train_gpt2.cu -e d12), B4 T64, B8 T1024, B16 T1024
#     tsr_bf16   tsr_gpt2 --precision bf16, 124M B8 T1024, --steps steps: its losses against
#                the fp32 (TF32) run's (bar 2e-2 absolute), tokens/ms of both
#     tiles      --tiles auto on the GPU against a GPT-2 tile sweep (124M B8 T1024)
#     workers    two CUDA workers sharing the GPU (STARPU_NWORKER_PER_CUDA=2): losses, speed
#     cpu16      the node's CPU cores: --tiles auto scripts and 124M against llm.c + BLIS
#     submit16   124M B4 T64 on the node's CPU cores, 12 steps, each case twice, alternated: the
#                default; a core kept for the submitting thread (STARPU_MAIN_THREAD_BIND=1);
#                2 and 4 sub-batches, as many submitting threads (TSR_SUBMIT_THREADS), with and
#                without that core; tiles of 64 tokens and half the features (tok 64 ch 384
#                hid 1536 heads 6: attention fused with its projections, half the default's
#                13,110 tasks a step); OUT/submit16.csv: the steady step and the submitting time
#     models     GPT-2 350M, 774M, 1558M (llm.c's d24, d36, d48), B8 T1024, --precision bf16
#                against llm.c's bf16 trainer (train_gpt2.cu -e d24 ...): the memory
#                estimate (model line), peak GPU memory, speed
#     torch      PyTorch (the node's python3, timing/torch_gpt2.py) beside tsr_gpt2 from the same
#                124M checkpoint and batches (--no-shuffle), at the --sizes (the issue's: "8,1024
#                16,1024"; torch.compile takes about a minute a run): tsr_gpt2
#                fp32 (TF32) and bf16, PyTorch fp32 and bf16 (autocast), eager and
#                torch.compile, one after another; OUT/torch_vs_tessera.csv, and the
#                losses of the fp32 runs (bar 1e-3 relative: TF32 both) and the bf16 runs
#                (bar 2e-2 absolute) against each other
#     mpi2       two MPI ranks sharing the GPU (the MPI bundle's own mpirun, one CUDA worker
#                each), 124M B8 T64 and B8 T1024, 10 steps: 1 rank, then 2; the largest
#                relative loss difference (bar 1e-5) and the steady step times; skipped
#                without the MPI bundle; first 1 rank with the simulated GPU nodes' tiles
#                (B8 --tile-voc 6288, 3144; B4 12576, B2 6288, B1 3144), into STARPU_HOME's models
# Tessera runs on the GPU alone (STARPU_NCPU=0) unless a stage says otherwise.
set -uo pipefail
bundle=bundle mpi_bundle=bundle-mpi build=build-device llmc=bundle-llmc/run llmc_src=bundle-llmc/src out=gpu_node_out steps=20
sizes="4,64 8,1024 16,1024"
stages=()
here=$(cd "$(dirname "$0")" && pwd)
PROG=gpu_node.sh
# shellcheck source=lib/args.sh
. "$here/lib/args.sh"
all_stages=(tests correct residency profile speed bf16 tsr_bf16 tiles workers cpu16 submit16 models torch mpi2)
while [ $# -gt 0 ]; do
  case $1 in
    --bundle|--build|--llmc|--llmc-src|--mpi-bundle|--out|--steps|--sizes)
      need_value "$1" $#
      case $1 in
        --steps) check_count --steps "$2" 3 10000 ;;
        --sizes) ;;   # checked below
        *) check_path "$1" "$2" ;;
      esac ;;
  esac
  case $1 in
    --bundle) bundle=$2; shift 2 ;; --build) build=$2; shift 2 ;; --llmc) llmc=$2; shift 2 ;;
    --llmc-src) llmc_src=$2; shift 2 ;; --mpi-bundle) mpi_bundle=$2; shift 2 ;;
    --out) out=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --sizes) sizes=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | grep '^#'; exit 0 ;;
    -*) arg_error "unknown option '$(shown "$1")' (see --help)" ;;
    *) check_word stage "$1" "${all_stages[@]}"; stages+=("$1"); shift ;;
  esac
done
[ ${#stages[@]} -gt 0 ] || arg_error "name at least one stage (see --help)"
n='[1-9][0-9]{0,5}'
[[ $sizes =~ ^$n,$n( $n,$n)*$ ]] || arg_error "--sizes '$(shown "$sizes")': B,T pairs of whole numbers separated by spaces"
[ -x "$bundle/bin/tsr_gpt2" ] || arg_error "no $(shown "$bundle")/bin/tsr_gpt2 (run deps/bundle.sh)"
bundle=$(cd "$bundle" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
[ -d "$llmc" ] && llmc=$(cd "$llmc" && pwd)
[ -d "$mpi_bundle" ] && mpi_bundle=$(cd "$mpi_bundle" && pwd)
[ -d "$llmc_src" ] && llmc_src=$(cd "$llmc_src" && pwd)
cuda_lib=/usr/local/cuda/targets/x86_64-linux/lib
export LD_LIBRARY_PATH=$bundle/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export STARPU_HOME=${STARPU_HOME:-$out/starpu_home}   # perf models of this machine
tsr=$bundle/bin/tsr_gpt2
ckpt=$out/gpt2_124M.bin
quiet_args=(--val-every 0 --sample-every 0)

say() { echo "== $*"; }
# losses FILE: the "step N: train loss X" values, one a line
losses() { sed -n 's/^step *[0-9]*[:/].*train loss \([-0-9.eE+naif]*\).*/\1/p' "$1"; }
# summary_ms LOG WHAT: the milliseconds tsr_gpt2's summary line gives after WHAT
# ("median step", "submitting its tasks took")
summary_ms() { sed -n "s/^summary:.*$2 \([0-9.]*\) ms.*/\1/p" "$1"; }
# maxrel A B: the largest |a - b| / |b| over the lines both files have
maxrel() { paste -d' ' "$1" "$2" | awk 'NF == 2 { d = $1 - $2; d = d < 0 ? -d : d; b = $2 < 0 ? -$2 : $2
  r = d / b; if (r > m) m = r; n++ } END { printf "%.3g over %d losses\n", m, n }'; }
# maxabs A B: the largest |a - b| over the lines both files have
maxabs() { paste -d' ' "$1" "$2" | awk 'NF == 2 { d = $1 - $2; d = d < 0 ? -d : d; if (d > m) m = d; n++ }
  END { printf "%.3g over %d losses\n", m, n }'; }
checkpoint() { # llm.c's seed-42 124M init, written once
  [ -f "$ckpt" ] || "$tsr" --model 124M --steps 0 --gpus 0 --write-checkpoint "$ckpt" > "$out/checkpoint.log" 2>&1
  if [ -d "$llmc" ]; then ln -sf "$ckpt" "$llmc/gpt2_124M.bin"; fi
}
gpu=(env STARPU_NCPU=0 "$tsr")   # the GPU alone

stage_tests() {
  say "ctest -L gpu in $build"
  local dir; dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  # the tests name the source and build trees by their paths on the build machine
  [[ $dir == /* && $dir != *$'\n'* ]] || { echo "no source directory in $build/CMakeCache.txt"; return; }
  if [ ! -e "$dir" ]; then mkdir -p "$(dirname "$dir")" && ln -s "$PWD" "$dir"; fi
  (cd "$build" && LD_LIBRARY_PATH=$PWD:$LD_LIBRARY_PATH timeout 300 ctest -L gpu --timeout 60 --output-on-failure) \
    > "$out/tests.log" 2>&1
  grep -E "tests passed|Failed|\*\*\*|CUDA workers executed" "$out/tests.log" | tail -40
}

stage_correct() {
  checkpoint
  say "124M B4 T64, 10 steps: CPU, GPU strict fp32, GPU TF32, llm.c fp32"
  timeout 120 "$tsr" --model 124M --steps 10 --gpus 0 "${quiet_args[@]}" > "$out/correct_cpu.log" 2>&1
  timeout 120 "${gpu[@]}" --model 124M --steps 10 --strict-fp32 "${quiet_args[@]}" > "$out/correct_gpu_strict.log" 2>&1
  timeout 120 "${gpu[@]}" --model 124M --steps 10 "${quiet_args[@]}" > "$out/correct_gpu_tf32.log" 2>&1
  if [ -x "$llmc/train_gpt2fp32cu" ]; then
    : > "$out/correct_llmc_fp32.log"   # before the loop below reads it (the subshell creates it late)
    (cd "$llmc" && timeout 120 ./train_gpt2fp32cu -b 4 -t 64 -l 0.0001 -v 100000 -s 100000) > "$out/correct_llmc_fp32.log" 2>&1 &
    local pid=$!
    while kill -0 $pid 2>/dev/null && [ "$(grep -c 'train loss' "$out/correct_llmc_fp32.log")" -lt 10 ]; do sleep 0.2; done
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
  fi
  for f in cpu gpu_strict gpu_tf32 llmc_fp32; do losses "$out/correct_$f.log" | head -10 > "$out/losses_$f.txt"; done
  paste -d' ' "$out"/losses_{cpu,gpu_strict,gpu_tf32,llmc_fp32}.txt | sed '1i cpu gpu_strict gpu_tf32 llmc_fp32'
  echo "GPU strict fp32 vs CPU (bar 1e-5): $(maxrel "$out/losses_gpu_strict.txt" "$out/losses_cpu.txt")"
  echo "GPU TF32 vs llm.c fp32 (bar 1e-3): $(maxrel "$out/losses_gpu_tf32.txt" "$out/losses_llmc_fp32.txt")"
  grep -h "^runtime:\|summary:\|error" "$out"/correct_gpu_*.log | cut -c1-300
}

stage_residency() {
  checkpoint
  for bt in "4,64" "8,1024"; do
    IFS=, read -r -a bt <<<"$bt"; set -- "${bt[@]}"
    say "B$1 T$2: host <-> GPU copies a steady step (--profile)"
    timeout 180 "${gpu[@]}" --model 124M -B "$1" -T "$2" --steps 12 "${quiet_args[@]}" --profile \
      > "$out/residency_B$1_T$2.log" 2>&1
    grep -h "^model:\|summary:\|host <-> GPU\|error" "$out/residency_B$1_T$2.log" | cut -c1-300
    sed -n '/steady steps, tasks/,/^  worker/p' "$out/residency_B$1_T$2.log" | head -40
  done
}

stage_profile() {
  checkpoint
  local p
  for p in fp32 bf16; do
    say "B8 T1024 $p: where a steady step goes (--profile)"
    timeout 180 "${gpu[@]}" --model 124M -B 8 -T 1024 --steps 12 --precision "$p" "${quiet_args[@]}" --profile \
      > "$out/profile_$p.log" 2>&1
    grep -h "summary:\|host <-> GPU\|error" "$out/profile_$p.log" | cut -c1-300
    sed -n '/steady steps, tasks/,/^  worker/p' "$out/profile_$p.log" | head -45
  done
}

versus() { # versus NAME B T REFERENCE-COMMAND [TESSERA-ARGS [MODEL]]
  local name=$1 B=$2 T=$3 ref=$4 targs=${5:-} model=${6:-124M}
  say "$name: B$B T$T"
  local log=$out/${name}_B${B}_T${T}.log
  STARPU_NCPU=0 timeout 300 bash -x "$here/time_gpt2_vs_reference.sh" --exe "$tsr" --model "$model" -B "$B" -T "$T" \
    --steps "$steps" --ref-dir "$llmc" --reference "$ref" --tessera-args "$targs" --out "$out/${name}_B${B}_T${T}" \
    > "$log" 2> "$log.trace" || { echo "time_gpt2_vs_reference.sh failed ($?); the end of its trace:"; tail -15 "$log.trace"; }
  cat "$log"
}

stage_speed() {
  checkpoint
  for bt in $sizes; do
    IFS=, read -r -a bt <<<"$bt"; set -- "${bt[@]}"   # B,T: checked numbers
    versus vs_llmc_fp32 "$1" "$2" "./train_gpt2fp32cu -b $1 -t $2 -l 0.0001 -v 100000 -s 100000"
  done
}

stage_models() {
  local m
  for m in 350M:d24 774M:d36 1558M:d48; do
    # the estimate alone: a run refused under a tiny --max-memory prints it at once
    echo "${m%%:*} bf16 B8 T1024: $("$tsr" --model "${m%%:*}" -B 8 -T 1024 --precision bf16 --max-memory 1K 2>&1 |
      grep -o 'would need about [0-9.]* GB ([^)]*)')"
    versus "models_${m%%:*}_bf16" 8 1024 "./train_gpt2cu -e ${m#*:} -b 8 -t 1024 -l 0.0001 -v 100000 -s 100000" \
      "--precision bf16" "${m%%:*}"
  done
}

stage_bf16() {
  for bt in $sizes; do
    IFS=, read -r -a bt <<<"$bt"; set -- "${bt[@]}"   # B,T: checked numbers
    say "llm.c bf16 (train_gpt2.cu -e d12): B$1 T$2"
    (cd "$llmc" && timeout 120 ./train_gpt2cu -e d12 -b "$1" -t "$2" -l 0.0001 -v 100000 -s 100000 -x $((steps + 1))) \
      > "$out/llmc_bf16_B$1_T$2.log" 2>&1
    grep "^step" "$out/llmc_bf16_B$1_T$2.log" | tail -n +2 |
      sed -E 's/.*\| ([0-9.]+) ms \|.*/\1/' | sort -g | awk -v bt=$(($1 * $2)) '{ v[n++] = $1 }
        END { if (n) printf "median %.2f ms a step, %.1f tokens/ms (%d steps)\n", v[int(n/2)], bt / v[int(n/2)], n }'
  done
}

stage_tsr_bf16() {
  checkpoint
  local args=(--model 124M -B 8 -T 1024 --steps "$steps" "${quiet_args[@]}")
  say "124M B8 T1024, $steps steps: --precision bf16 against fp32 (TF32), GPU alone"
  timeout 300 "${gpu[@]}" "${args[@]}" > "$out/tsr_fp32_B8_T1024.log" 2>&1
  timeout 300 "${gpu[@]}" "${args[@]}" --precision bf16 > "$out/tsr_bf16_B8_T1024.log" 2>&1
  for p in fp32 bf16; do losses "$out/tsr_${p}_B8_T1024.log" > "$out/losses_tsr_$p.txt"; done
  paste -d' ' "$out"/losses_tsr_{fp32,bf16}.txt | sed '1i fp32 bf16'
  echo "bf16 vs fp32 (bar 2e-2 absolute): $(maxabs "$out/losses_tsr_bf16.txt" "$out/losses_tsr_fp32.txt")"
  grep -h "^precision:\|summary:\|error" "$out"/tsr_{fp32,bf16}_B8_T1024.log | cut -c1-300
}

stage_tiles() {
  local b=$out/bundle_build; mkdir -p "$b/algorithms/gpt2"
  ln -sf "$bundle/bin/tsr_gpt2" "$b/algorithms/gpt2/"
  say "GPU: --tiles auto against a 124M B8 T1024 tile sweep"
  (cd "$here/.." && timeout 330 timing/run_tiles_auto_gpt2.sh --gpu --model 124M -B 8 -T 1024 --rounds 2 \
     --build "$b" --out "$out/tiles_auto_gpt2_124M_gpu.csv") > "$out/tiles_gpu.log" 2>&1
  tail -8 "$out/tiles_gpu.log"
}

stage_workers() {
  checkpoint
  say "two CUDA workers on the GPU (STARPU_NWORKER_PER_CUDA=2), 124M B8 T64, 10 steps"
  timeout 180 "${gpu[@]}" --model 124M -B 8 --steps 10 "${quiet_args[@]}" > "$out/workers_1.log" 2>&1
  STARPU_NWORKER_PER_CUDA=2 timeout 180 "${gpu[@]}" --model 124M -B 8 --steps 10 --sub-batches 2 "${quiet_args[@]}" \
    > "$out/workers_2.log" 2>&1
  losses "$out/workers_1.log" > "$out/losses_workers_1.txt"
  losses "$out/workers_2.log" > "$out/losses_workers_2.txt"
  echo "two workers vs one: $(maxrel "$out/losses_workers_2.txt" "$out/losses_workers_1.txt")"
  grep -h "summary:\|error" "$out"/workers_*.log | cut -c1-300
}

stage_cpu16() {
  local n; n=$(nproc)
  export STARPU_NCUDA=0   # CPU workers alone
  local b=$out/bundle_build; mkdir -p "$b/timing" "$b/algorithms/gpt2"
  ln -sf "$bundle/bin/time_gemm" "$bundle/bin/time_attention" "$b/timing/"
  ln -sf "$bundle/bin/tsr_gpt2" "$b/algorithms/gpt2/"
  local kind
  for kind in gemm attention gpt2; do
    say "CPU, $n workers: --tiles auto against the $kind sweep"
    local args=(--threads "$n" --build "$b" --rounds 2 --out "$out/tiles_auto_${kind}_${n}w.csv")
    [ $kind = gpt2 ] && args+=(--model d2)
    [ $kind = gpt2 ] || args+=(--niter 2)
    (cd "$here/.." && timeout "${cpu16_limit[$kind]}" "timing/run_tiles_auto_$kind.sh" "${args[@]}") \
      > "$out/cpu16_$kind.log" 2>&1
    tail -12 "$out/cpu16_$kind.log"
  done
  [ -f "$llmc_src/train_gpt2.c" ] || { echo "no llm.c source in $llmc_src: no llm.c + BLIS run"; return; }
  checkpoint
  say "124M B4 T64 on $n CPU workers against llm.c + BLIS (the same libblis)"
  "$here/llmc_cpu_cblas.sh" --blas-lib "$bundle/lib/libblis.so.4" --cblas-h "$llmc_src/cblas.h" \
    --checkpoint "$ckpt" "$llmc_src" "$out/llmc_cpu" > "$out/llmc_cpu_build.log" 2>&1 || { tail -3 "$out/llmc_cpu_build.log"; return; }
  timeout 150 "$here/time_gpt2_vs_reference.sh" --exe "$tsr" --model 124M -B 4 -T 64 --steps 12 \
    --tessera-args "--gpus 0 --threads $n" --ref-dir "$out/llmc_cpu" --out "$out/vs_llmc_cpu_${n}w" \
    --reference "env OMP_NUM_THREADS=$n BLIS_NUM_THREADS=$n BLIS_ARCH_TYPE=0 ./train_gpt2_cblas" \
    > "$out/vs_llmc_cpu_${n}w.log" 2>&1
  cat "$out/vs_llmc_cpu_${n}w.log"
  unset STARPU_NCUDA
}
# torch_run RUN B T LOG: one run of the torch stage (tessera_fp32, torch_bf16_compiled, ...)
torch_run() {
  local run=$1 B=$2 T=$3 log=$4 p=${1#*_}
  p=${p%_compiled}
  local common=(--load "$ckpt" -B "$B" -T "$T" --steps "$steps")
  case $run in
    tessera_*) timeout 300 "${gpu[@]}" "${common[@]}" --no-shuffle --precision "$p" "${quiet_args[@]}" ;;
    *_compiled) timeout 600 python3 "$here/torch_gpt2.py" "${common[@]}" --precision "$p" --compile ;;
    *) timeout 300 python3 "$here/torch_gpt2.py" "${common[@]}" --precision "$p" ;;
  esac > "$log" 2>&1 || echo "$run B$B T$T: exit $? (the end of $log: $(tail -2 "$log" | tr '\n' ' '))"
}

stage_torch() {
  python3 -c "import torch" 2>/dev/null || { echo "torch: this python3 has no torch: skipped"; return; }
  checkpoint
  local csv=$out/torch_vs_tessera.csv run log ms
  echo "B,T,run,median_ms,tokens_per_ms" > "$csv"
  for bt in $sizes; do
    IFS=, read -r -a bt <<<"$bt"; set -- "${bt[@]}"   # B,T: checked numbers
    say "124M B$1 T$2, $steps steps: tsr_gpt2 and PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
    for run in tessera_fp32 torch_fp32 torch_fp32_compiled tessera_bf16 torch_bf16 torch_bf16_compiled; do
      log=$out/torch_${run}_B$1_T$2.log
      torch_run "$run" "$1" "$2" "$log"
      ms=$(summary_ms "$log" "median step")
      if [ -n "$ms" ]; then
        echo "$1,$2,$run,$ms,$(awk -v ms="$ms" -v bt=$(($1 * $2)) 'BEGIN { printf "%.2f", bt / ms }')"
      else echo "$1,$2,$run,nan,nan"; fi >> "$csv"
      losses "$log" > "$out/losses_torch_${run}_B$1_T$2.txt"
    done
    echo "fp32, PyTorch vs tsr_gpt2 (bar 1e-3): $(maxrel "$out/losses_torch_torch_fp32_B$1_T$2.txt" "$out/losses_torch_tessera_fp32_B$1_T$2.txt")"
    echo "bf16, PyTorch vs tsr_gpt2 (bar 2e-2 absolute): $(maxabs "$out/losses_torch_torch_bf16_B$1_T$2.txt" "$out/losses_torch_tessera_bf16_B$1_T$2.txt")"
  done
  column -t -s, "$csv"
}

stage_mpi2() {
  # the task shapes of the simulated GPU nodes, so that STARPU_HOME's models
  # hold them measured (timing/simulation/perfmodels/h200-gpu/machine.txt lists
  # them derived): the narrower vocabulary tiles of 4 to 16 ranks (2 ranks'
  # 12576 runs below) at B8 a GPU, and the sub-batches of strong scaling
  # (64 sequences over 2, 4, 8 nodes of 8 GPUs: B4, B2, B1 a GPU)
  local bv b voc
  for bv in 8:6288 8:3144 4:12576 2:6288 1:3144; do
    b=${bv%:*} voc=${bv#*:}
    timeout 120 "${gpu[@]}" --model 124M -B "$b" -T 1024 --steps 4 --tile-voc "$voc" "${quiet_args[@]}" \
      > "$out/mpi2_B${b}_voc$voc.log" 2>&1 || { echo "-B $b --tile-voc $voc: exit $?"; tail -3 "$out/mpi2_B${b}_voc$voc.log"; }
    grep -h "summary:" "$out/mpi2_B${b}_voc$voc.log" | sed "s/^/-B $b --tile-voc $voc: /" | cut -c1-200
  done
  [ -x "$mpi_bundle/bin/mpirun" ] && [ -x "$mpi_bundle/bin/tsr_gpt2" ] ||
    { echo "mpi2: no MPI bundle in $mpi_bundle (deps/bundle_mpi.sh; --mpi-bundle DIR): skipped"; return; }
  if [ -s "$mpi_bundle/base.sha256" ] && ! (cd "$bundle/lib" && sha256sum --quiet -c "$mpi_bundle/base.sha256") \
       > "$out/mpi2_base.log" 2>&1; then
    echo "mpi2: $bundle/lib is not the bundle $mpi_bundle was made beside: skipped"; cat "$out/mpi2_base.log"; return
  fi
  local T log1 log2 mode; mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
  echo "GPU compute mode (two processes need Default): ${mode:-unknown}"
  for T in 64 1024; do
    say "124M B8 T$T, 10 steps: 1 rank, then 2 MPI ranks sharing GPU 0 (one CUDA worker each)"
    local args=(--model 124M -B 8 -T "$T" --steps 10 "${quiet_args[@]}")
    log1=$out/mpi2_1rank_T$T.log log2=$out/mpi2_2ranks_T$T.log
    LD_LIBRARY_PATH=$mpi_bundle/lib:$LD_LIBRARY_PATH STARPU_NCPU=0 timeout 150 "$mpi_bundle/bin/tsr_gpt2" "${args[@]}" \
      > "$log1" 2>&1 || { echo "1 rank: exit $?, the end of $log1:"; tail -5 "$log1"; }
    STARPU_NCPU=0 timeout 150 "$mpi_bundle/bin/mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 \
      "$mpi_bundle/bin/tsr_gpt2" "${args[@]}" > "$log2" 2>&1 || { echo "2 ranks: exit $?, the end of $log2:"; tail -5 "$log2"; }
    losses "$log1" > "$out/losses_mpi2_1rank_T$T.txt"
    losses "$log2" > "$out/losses_mpi2_2ranks_T$T.txt"
    paste -d' ' "$out"/losses_mpi2_{1rank,2ranks}_T$T.txt | sed '1i 1rank 2ranks'
    echo "2 ranks vs 1 (bar 1e-5): $(maxrel "$out/losses_mpi2_2ranks_T$T.txt" "$out/losses_mpi2_1rank_T$T.txt")"
    grep -h "^runtime:\|summary:\|error" "$log1" "$log2" | cut -c1-300
  done
}

# Where the 16-core step's submission goes (issue: the workers wait on one
# submitting thread sharing their cores): a core of its own, or more threads.
stage_submit16() {
  local csv=$out/submit16.csv r case log
  say "124M B4 T64 on $(nproc) CPU cores: the submitting thread's core and count"
  echo "round,case,step_ms,submitting_ms" > "$csv"
  for r in 1 2; do
    for case in default main_core sub2 sub2_main_core sub4 fused64; do
      local vars=(STARPU_NCUDA=0) args=()
      case $case in *main_core) vars+=(STARPU_MAIN_THREAD_BIND=1) ;; esac
      case $case in sub2*) vars+=(TSR_SUBMIT_THREADS=2); args=(--sub-batches 2) ;;
                    sub4) vars+=(TSR_SUBMIT_THREADS=4); args=(--sub-batches 4) ;;
                    fused64) args=(--tile-tok 64 --tile-ch 384 --tile-hid 1536 --tile-voc 3144 --tile-heads 6) ;; esac
      log=$out/submit16_${case}_$r.log
      env "${vars[@]}" timeout 120 "$tsr" --model 124M -B 4 -T 64 --steps 12 --gpus 0 "${args[@]}" \
        "${quiet_args[@]}" > "$log" 2>&1
      echo "$r,$case,$(summary_ms "$log" "median step"),$(summary_ms "$log" "submitting its tasks took")" >> "$csv"
    done
  done
  cat "$csv"
  grep -h "^model:\|^runtime:" "$out"/submit16_*_1.log | cut -c1-200
}

declare -A cpu16_limit=([gemm]=200 [attention]=100 [gpt2]=150)

for s in "${stages[@]}"; do
  case $s in
    tests|correct|residency|profile|speed|bf16|tsr_bf16|tiles|workers|cpu16|submit16|models|torch|mpi2) start=$(date +%s); "stage_$s"; say "$s took $(( $(date +%s) - start )) s" ;;
    *) echo "error: unknown stage $s (see --help)" >&2; exit 2 ;;
  esac
done
