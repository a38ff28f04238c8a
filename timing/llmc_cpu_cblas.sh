#!/usr/bin/env bash
# llmc_cpu_cblas.sh: build llm.c's CPU trainer (train_gpt2.c) with its two
# matmul functions calling cblas_sgemm of a given BLAS (timing/llmc/
# matmul_cblas.inc), so that Tessera and llm.c can be timed with the same BLAS
# (timing/time_gpt2_vs_reference.sh). llm.c's loops are otherwise unchanged
# (its B 4 and T 64 are hard-coded; OMP_NUM_THREADS sets its threads and
# BLIS's).
#
#   timing/llmc_cpu_cblas.sh [options] LLMC_DIR OUT_DIR
#     LLMC_DIR          an llm.c checkout (train_gpt2.c and llmc/*.h; fetched
#                       by hand: this script does not download anything)
#     OUT_DIR           written: train_gpt2_cblas.c, the headers, the data llm.c
#                       reads (tokenizer, tiny Shakespeare, from Tessera's
#                       algorithms/gpt2/data) and the program train_gpt2_cblas
#     --blas-lib FILE   the BLAS library to link (default Debian's OpenMP BLIS,
#                       /usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4)
#     --cblas-h FILE    its cblas.h (default Debian's BLIS one)
#     --checkpoint FILE gpt2_124M.bin to link into OUT_DIR (make one with
#                       tsr_gpt2 --model 124M --steps 0 --write-checkpoint FILE:
#                       llm.c's own seed-42 initialisation)
# Run it as: cd OUT_DIR && OMP_NUM_THREADS=N ./train_gpt2_cblas
set -euo pipefail
blas_lib=/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4
cblas_h=/usr/include/x86_64-linux-gnu/blis-openmp/cblas.h
checkpoint=""
args=()
here=$(cd "$(dirname "$0")" && pwd)
PROG=llmc_cpu_cblas.sh
# shellcheck source=lib/args.sh
. "$here/lib/args.sh"
while [ $# -gt 0 ]; do
  case $1 in
    --blas-lib|--cblas-h|--checkpoint) need_value "$1" $#; check_path "$1" "$2" ;;
  esac
  case $1 in
    --blas-lib) blas_lib=$2; shift 2 ;;
    --cblas-h) cblas_h=$2; shift 2 ;;
    --checkpoint) checkpoint=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
    -*) arg_error "unknown option '$(shown "$1")' (see --help)" ;;
    *) args+=("$1"); shift ;;
  esac
done
[ ${#args[@]} -eq 2 ] || arg_error "give LLMC_DIR and OUT_DIR (see --help)"
src=${args[0]} out=${args[1]}
check_path LLMC_DIR "$src"
check_path OUT_DIR "$out"
data=$here/../algorithms/gpt2/data
if [ ! -f "$src/train_gpt2.c" ] || [ ! -d "$src/llmc" ]; then
  echo "error: $src is not an llm.c checkout (no train_gpt2.c or llmc/)" >&2; exit 1
fi
for f in "$blas_lib" "$cblas_h"; do
  [ -f "$f" ] || { echo "error: $f not found (see --blas-lib, --cblas-h)" >&2; exit 1; }
done
[ -z "$checkpoint" ] || [ -f "$checkpoint" ] || { echo "error: no checkpoint $checkpoint" >&2; exit 1; }

mkdir -p "$out/llmc" "$out/dev/data/tinyshakespeare"
cp "$src"/llmc/*.h "$out/llmc/"
cp "$cblas_h" "$out/cblas.h"
cp "$here/llmc/matmul_cblas.inc" "$out/"
cp "$data/gpt2_tokenizer.bin" "$out/"
cp "$data"/tiny_shakespeare_{train,val}.bin "$out/dev/data/tinyshakespeare/"
[ -z "$checkpoint" ] || ln -sf "$(cd "$(dirname "$checkpoint")" && pwd)/$(basename "$checkpoint")" "$out/gpt2_124M.bin"

# llm.c's matmul_forward and matmul_backward (each from its "void name(" line
# to the first "}" in column 0) give way to one include of ours.
awk '/^void matmul_(forward|backward)\(/ { skip = 1; if (!done++) print "#include \"matmul_cblas.inc\"" }
     !skip { print }
     skip && /^}/ { skip = 0 }' "$src/train_gpt2.c" > "$out/train_gpt2_cblas.c"
left=$(grep -c '^void matmul_\(forward\|backward\)(' "$out/train_gpt2_cblas.c" || true)
included=$(grep -c 'matmul_cblas.inc' "$out/train_gpt2_cblas.c" || true)
if [ "$left" -ne 0 ] || [ "$included" -ne 1 ]; then
  echo "error: $src/train_gpt2.c does not have the two matmul functions this script replaces" >&2; exit 1
fi

# llm.c's Makefile flags for its CPU trainer, plus the BLAS
libdir=$(cd "$(dirname "$blas_lib")" && pwd)
${CC:-gcc} -O3 -Ofast -Wno-unused-result -Wno-ignored-pragmas -Wno-unknown-attributes -march=native \
  -fopenmp -DOMP -I "$out" "$out/train_gpt2_cblas.c" "$libdir/$(basename "$blas_lib")" \
  -Wl,-rpath,"$libdir" -lm -lgomp -o "$out/train_gpt2_cblas"
echo "built $out/train_gpt2_cblas against $blas_lib"
