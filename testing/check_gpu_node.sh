#!/bin/bash
# timing/gpu_node.sh without a GPU: its argument checks, and its `correct`
# stage on stand-ins for tsr_gpt2 and llm.c's fp32 trainer, whose losses
# differ by known amounts: the stage must read both step-line formats and
# report the largest relative difference of each pair of runs.
#   check_gpu_node.sh SCRIPT WORKDIR
set -u
script=$1 work=$2
rm -rf "$work" && mkdir -p "$work/bundle/bin" "$work/bundle/lib" "$work/llmc"
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# tsr_gpt2: losses 10 - s/10; TF32 (no --strict-fp32, on the GPU) adds 1e-4,
# --precision bf16 3e-3 more
cat > "$work/bundle/bin/tsr_gpt2" <<'STUB'
#!/bin/bash
args=" $* "
case $args in *" --write-checkpoint "*) f=${args#* --write-checkpoint }; : > "${f%% *}"; exit 0 ;; esac
off=0
[ "${STARPU_NCPU:-}" = 0 ] && [[ $args != *" --strict-fp32 "* ]] && off=0.0001
[[ $args == *" --precision bf16 "* ]] && off=0.0031
[ "${OMPI_COMM_WORLD_SIZE:-1}" = 2 ] && off=$(awk -v o=$off 'BEGIN { print o + 2e-6 }')   # 2 MPI ranks
for s in $(seq 0 9); do awk -v s=$s -v o=$off 'BEGIN { printf "step %d: train loss %f (took 1.0 ms)\n", s, 10 - s / 10 + o }'; done
STUB
# llm.c: its own step format, losses 10 - s/10 exactly
cat > "$work/llmc/train_gpt2fp32cu" <<'STUB'
#!/bin/bash
for s in $(seq 1 10); do awk -v s=$s 'BEGIN { printf "step %4d/74: train loss %f (1.0 ms, 1 tok/s)\n", s, 10 - (s - 1) / 10 }'; done
STUB
chmod +x "$work/bundle/bin/tsr_gpt2" "$work/llmc/train_gpt2fp32cu"

bash "$script" > /dev/null 2>&1; [ $? -eq 2 ] || bad "no stage accepted"
bash "$script" --bundle "$work/bundle" bogus > /dev/null 2>&1; [ $? -eq 2 ] || bad "an unknown stage accepted"
bash "$script" --bundle "$work/none" correct > /dev/null 2>&1; [ $? -eq 2 ] || bad "a missing bundle accepted"
bash "$script" --bundle "$work/bundle" --sizes "8x1024" speed > /dev/null 2>&1; [ $? -eq 2 ] || bad "a bad --sizes accepted"

bash "$script" --bundle "$work/bundle" --llmc "$work/llmc" --out "$work/out" correct > "$work/log" 2>&1
grep -q "GPU strict fp32 vs CPU (bar 1e-5): 0 over 10 losses" "$work/log" || bad "strict vs CPU: $(grep strict "$work/log")"
# 1e-4 over the smallest loss, 9.1: 1.1e-05
grep -q "GPU TF32 vs llm.c fp32 (bar 1e-3): 1.1e-05 over 10 losses" "$work/log" ||
    bad "TF32 vs llm.c: $(grep TF32 "$work/log")"
# the tsr_bf16 stage: bf16 against the fp32 (TF32) run, absolute
bash "$script" --bundle "$work/bundle" --out "$work/out" tsr_bf16 > "$work/bf16.log" 2>&1
grep -q "bf16 vs fp32 (bar 2e-2 absolute): 0.003 over 10 losses" "$work/bf16.log" ||
    bad "tsr_bf16 stage: $(grep "bf16 vs" "$work/bf16.log")"
# the mpi2 stage: skipped without the MPI bundle, or when it was made beside
# another bundle; else 2 ranks (a stand-in mpirun) against 1, relative
bash "$script" --bundle "$work/bundle" --mpi-bundle "$work/none" --out "$work/out" mpi2 > "$work/mpi.log" 2>&1 ||
    bad "mpi2 without the MPI bundle exited $?"
grep -q "no MPI bundle in $work/none.*skipped" "$work/mpi.log" || bad "mpi2 without the MPI bundle: $(head -3 "$work/mpi.log")"
mkdir -p "$work/bundle-mpi/bin" && cp "$work/bundle/bin/tsr_gpt2" "$work/bundle-mpi/bin/"
cat > "$work/bundle-mpi/bin/mpirun" <<'STUB'
#!/bin/bash
while [ "$1" != -np ]; do shift; done
OMPI_COMM_WORLD_SIZE=$2 exec "${@:3}"
STUB
chmod +x "$work/bundle-mpi/bin/mpirun"
echo lib > "$work/bundle/lib/libx.so.1" && (cd "$work/bundle/lib" && sha256sum libx.so.1) > "$work/bundle-mpi/base.sha256"
bash "$script" --bundle "$work/bundle" --mpi-bundle "$work/bundle-mpi" --out "$work/out" mpi2 > "$work/mpi.log" 2>&1
# 2e-6 over the smallest loss, 9.1001: 2.2e-07, at T 64 and 1024
[ "$(grep -c "2 ranks vs 1 (bar 1e-5): 2.2e-07 over 10 losses" "$work/mpi.log")" = 2 ] ||
    bad "mpi2 stage: $(grep "ranks vs" "$work/mpi.log")"
echo other > "$work/bundle/lib/libx.so.1"
bash "$script" --bundle "$work/bundle" --mpi-bundle "$work/bundle-mpi" --out "$work/out" mpi2 > "$work/mpi.log" 2>&1
grep -q "is not the bundle .* was made beside: skipped" "$work/mpi.log" || bad "mpi2 beside another bundle: $(head -3 "$work/mpi.log")"
[ $fails -eq 0 ] && echo "gpu_node: all checks passed"
exit $((fails > 0))
