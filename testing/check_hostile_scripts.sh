#!/usr/bin/env bash
# The project's scripts against hostile or careless arguments and file
# contents (docs/files.md, "Scripts"): a shell payload in a count, a list, a
# name, a path or a CSV never runs (no marker file appears), a bad value ends
# in a non-zero exit and a message naming the option, and names that are
# only odd (quotes, backticks) are taken as data. No GPU, network or build:
# the programs the scripts drive are stand-ins.
#   check_hostile_scripts.sh SOURCE_DIR
# shellcheck disable=SC2016 # the payloads are meant literally
set -u

src=$(cd "${1:?usage: $0 SOURCE_DIR}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
# nothing from the user's environment: a home of our own, no caches set
export HOME=$tmp/home
unset XDG_CACHE_HOME TSR_CACHE_DIR TMPDIR
mkdir -p "$HOME"
# the payloads run pwn (on PATH), which leaves the marker $tmp/PWNED
mark=$tmp/PWNED
mkdir -p bin && printf '#!/bin/sh\ntouch "%s"\n' "$mark" >bin/pwn && chmod +x bin/pwn
export PATH=$tmp/bin:$PATH
pay='PATH[$(pwn)]'   # bash arithmetic on this runs pwn (PATH is set: no unbound error first)
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# refused NAME WORD COMMAND...: exits non-zero, with a message holding WORD
# (the option or variable), no shell error, and the payload did not run
refused() {
    local name=$1 word=$2 rc
    shift 2
    rm -f "$mark"
    timeout 60 "$@" >"$tmp/out.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] || bad "$name: exit 0"
    grep -q -F -e "$word" "$tmp/out.log" || bad "$name: no message naming $word: $(head -c 300 "$tmp/out.log")"
    ! grep -q -E "unbound variable|syntax error|value too great|command not found" "$tmp/out.log" ||
        bad "$name: a shell error: $(head -c 300 "$tmp/out.log")"
    [ ! -e "$mark" ] || bad "$name: the payload ran"
}
# no_payload NAME COMMAND...: the command ran (any exit) and the payload did not
no_payload() {
    local name=$1
    shift
    rm -f "$mark"
    timeout 60 "$@" >"$tmp/out.log" 2>&1
    [ ! -e "$mark" ] || bad "$name: the payload ran"
}
T=$src/timing S=$src/timing/simulation

# ---- stand-ins: a bundle with tsr_gpt2, llm.c's directory, a reference trainer
mkdir -p bundle/bin bundle/lib llmc ref
cat >bundle/bin/tsr_gpt2 <<'EOF'
#!/bin/bash
csv=""; while [ $# -gt 0 ]; do [ "$1" = --csv ] && csv=$2; shift; done
[ -z "$csv" ] || { echo "step,loss,ms,a,b,timing"; for s in 0 1 2 3 4; do echo "$s,10.5,2.0,0,0,steady"; done; } >"$csv"
for s in 0 1 2 3 4; do echo "step $s: train loss 10.5 (took 2.0 ms)"; done
EOF
printf '#!/bin/bash\nfor s in 1 2 3 4 5 6; do echo "step $s: train loss 10.0 (took 3.0 ms)"; done\n' >ref/ref.sh
chmod +x bundle/bin/tsr_gpt2 ref/ref.sh
tsr=$tmp/bundle/bin/tsr_gpt2

# ---- gnuplot scripts: names and CSV content are data
if command -v gnuplot >/dev/null; then
    # (the names run "touch PWNED" in this directory, where the scripts run)
    name='o`touch PWNED`'"'"'"x'
    no_payload "time_gpt2_vs_reference.sh --out with backticks and quotes" \
        bash "$T/time_gpt2_vs_reference.sh" --exe "$tsr" --reference ./ref.sh --ref-dir ref -B 4 -T 64 --steps 3 \
        --out "$name"
    [ -s "$name.png" ] && [ -s "$name.csv" ] || bad "time_gpt2_vs_reference.sh --out '$name': no CSV and PNG of that name"
    printf 'mb,mode,gflops\n64,o`touch PWNED`,1\n128,o`touch PWNED`,2\n64,a'"'"'; system("touch PWNED"); b='"'"'x,3\n' \
        >'c`touch PWNED`.csv'
    png="p'; system(\"touch PWNED\"); q='.png"
    no_payload "plot_csv.sh: backticks in the CSV's name, a quote in the PNG's, quotes in a group" \
        sh "$T/plot_csv.sh" 'c`touch PWNED`.csv' "$png" mb gflops mode
    [ -s "$png" ] || bad "plot_csv.sh: no PNG of the quoted name: $(cat out.log)"
    printf 'mb,mode,gflops\n64,a,1\n' >plain.csv
    no_payload "plot_csv.sh: a PNG name starting with '|'" sh "$T/plot_csv.sh" plain.csv "|touch PWNED"
    [ -s "|touch PWNED" ] || bad "plot_csv.sh: no PNG named '|touch PWNED'"
fi

# ---- bash arithmetic on unchecked values
refused "gpu_node.sh --steps payload" --steps bash "$T/gpu_node.sh" --bundle bundle --llmc llmc --out gn --steps "$pay" bf16
refused "gpu_node.sh --sizes 08,64" --sizes bash "$T/gpu_node.sh" --bundle bundle --llmc llmc --out gn --sizes 08,64 bf16
refused "gpu_node.sh: an unknown stage after a good one" bogus bash "$T/gpu_node.sh" --bundle bundle --out gn correct bogus
[ ! -e gn/correct_cpu.log ] || bad "gpu_node.sh ran a stage before refusing an unknown one"
refused "check_default.sh --rounds payload" --rounds bash "$T/gpu/check_default.sh" --bundle bundle --rounds "$pay"
refused "check_default.sh -B 08" -B bash "$T/gpu/check_default.sh" --bundle bundle -B 08
refused "check_default.sh --model payload" --model bash "$T/gpu/check_default.sh" --bundle bundle --model "$pay"
refused "simulate.sh --gpu-link payload" --gpu-link bash "$S/simulate.sh" --gpus 2 --gpu-link "$pay" tsr_gpt2
refused "run_scaling.sh --nodes payload" --nodes bash "$S/run_scaling.sh" --nodes "$pay" rs1.csv
refused "run_scaling.sh --nodes 3x" --nodes bash "$S/run_scaling.sh" --nodes 3x rs2.csv
refused "run_scaling.sh --only weak-t256" --only bash "$S/run_scaling.sh" --only weak-t256 rs3.csv
[ ! -e rs3.csv ] || bad "run_scaling.sh --only weak-t256 wrote rs3.csv"
refused "run_gpu_scaling.sh --gpus payload" --gpus bash "$S/run_gpu_scaling.sh" --gpus "$pay" gs1.csv
refused "run_gpu_scaling.sh --gpus 17" --gpus bash "$S/run_gpu_scaling.sh" --gpus 1,17 gs2.csv
refused "run_gpu_scaling.sh --precision fp16" --precision bash "$S/run_gpu_scaling.sh" --precision fp16 gs3.csv
[ ! -e gs3.csv ] || bad "run_gpu_scaling.sh --precision fp16 wrote gs3.csv"
refused "run_gpu_scaling.sh --batch payload" --batch bash "$S/run_gpu_scaling.sh" --batch "$pay" gs4.csv
refused "run_gpu_scaling.sh --batch 60 over 8 GPUs" --batch bash "$S/run_gpu_scaling.sh" --batch 60 --gpus 8 gs5.csv
[ ! -e gs5.csv ] || bad "run_gpu_scaling.sh --batch 60 --gpus 8 wrote gs5.csv"
refused "time_gpt2.sh --bt payload" --bt bash "$T/time_gpt2.sh" --exe "$tsr" --bt "$pay:64"
refused "time_gpt2_vs_reference.sh -B payload" -B \
    bash "$T/time_gpt2_vs_reference.sh" --exe "$tsr" --reference ./ref.sh --ref-dir ref -B "$pay"
mkdir -p b/algorithms/gpt2 && cp "$tsr" b/algorithms/gpt2/
refused "run_tiles_auto_gpt2.sh -T payload" -T bash "$T/run_tiles_auto_gpt2.sh" --build "$tmp/b" -T "$pay" --out "$tmp/x.csv"
refused "replay_gpt2_tiles.sh --steps payload" --steps bash "$T/replay_gpt2_tiles.sh" --exe "$tsr" --steps "$pay"
refused "run_tiles_auto_gemm.sh --rounds payload" --rounds bash "$T/run_tiles_auto_gemm.sh" --rounds "$pay"
refused "run_tiles_auto_attention.sh --T 08" --T bash "$T/run_tiles_auto_attention.sh" --T 08

# ---- missing values, bad counts and names
refused "simulate.sh --nodes (no value)" --nodes bash "$S/simulate.sh" --nodes
refused "simulate.sh --nodes 08" --nodes bash "$S/simulate.sh" --models epyc-avx512-2c --nodes 08 tsr_gpt2
refused "simulate.sh --workers payload" --workers bash "$S/simulate.sh" --workers "$pay" tsr_gpt2
refused "calibrate.sh NAME .." NAME bash "$S/calibrate.sh" .. "$tmp/b"
refused "validate.sh MODELS .." MODELS bash "$S/validate.sh" .. v.csv
refused "time_gpt2_vs_reference.sh --out (no value)" --out bash "$T/time_gpt2_vs_reference.sh" --out

# ---- deps/starpu/build.sh: option order, no HOME, a relative cache
out=$(TSR_CACHE_DIR=$tmp/cache bash "$src/deps/starpu/build.sh" --prefix --simgrid 2>&1)
[[ $out == "$tmp/cache/starpu-"*-simgrid-* ]] || bad "build.sh --prefix --simgrid: $out"
refused "deps/starpu/build.sh without HOME" HOME env -u HOME bash "$src/deps/starpu/build.sh" --prefix
refused "deps/simgrid/build.sh without HOME" HOME env -u HOME bash "$src/deps/simgrid/build.sh" --prefix
refused "deps/starpu/build.sh, a relative TSR_CACHE_DIR" TSR_CACHE_DIR \
    env TSR_CACHE_DIR=rel/cache bash "$src/deps/starpu/build.sh" --prefix
refused "deps/starpu/build.sh --bogus" --bogus bash "$src/deps/starpu/build.sh" --bogus

# ---- paths are data: a build directory with a space; an output onto a non-bundle
mkdir -p "my build/timing" "my build/algorithms/gpt2"
printf '#!/bin/sh\n[ "$1" = --threads ] && touch "%s/ran"\nexit 1\n' "$tmp" >"my build/timing/time_gemm"
cp "my build/timing/time_gemm" "my build/algorithms/gpt2/tsr_gpt2"
chmod +x "my build/timing/time_gemm" "my build/algorithms/gpt2/tsr_gpt2"
bash "$S/calibrate.sh" testmodels "$tmp/my build" >out.log 2>&1
[ -e ran ] || bad "calibrate.sh with a space in BUILD_DIR did not run its programs: $(tail -2 out.log)"
mkdir -p nb b2 && echo precious >nb/keep && : >b2/CMakeCache.txt
refused "deps/bundle.sh onto a directory that is not a bundle" OUT_DIR bash "$src/deps/bundle.sh" b2 nb
[ -f nb/keep ] || bad "deps/bundle.sh removed a directory that is not a bundle"

[ $fails -eq 0 ] && echo "hostile scripts: all checks passed"
exit $((fails > 0))
