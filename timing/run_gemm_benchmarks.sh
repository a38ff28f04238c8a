#!/usr/bin/env bash
# The GEMM benchmarks of the foundation issue, for the BLIS build (build/)
# and the OpenBLAS build (build-openblas/): CSV + PNG into timing/results/.
#   1. m = n = k = 4096, square tiles 128..2048, 2 workers, ordered and REDUX
#   2. k-heavy: m = n = 512 (one C tile), k = 65536 in tiles of 512..4096
# ratio_to_blas compares with one call of the same BLAS on 2 threads, measured
# in the same run. Takes about 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=timing/results
mkdir -p "$out"
for blas in blis openblas; do
  dir=build; [ "$blas" = openblas ] && dir=build-openblas
  [ -x "$dir/timing/time_gemm" ] || { echo "missing $dir/timing/time_gemm (build it first)" >&2; exit 1; }
  "$dir/timing/time_gemm" --m 4096 --n 4096 --k 4096 --tile 128,256,512,1024,2048 \
      --mode ordered,redux --threads 2 > "$out/gemm4096_$blas.csv"
  "$dir/timing/time_gemm" --m 512 --n 512 --k 65536 --mb 512 --nb 512 --kb 512,1024,2048,4096 \
      --mode ordered,redux --threads 2 > "$out/gemm_kheavy_$blas.csv"
  timing/plot_csv.sh "$out/gemm4096_$blas.csv" "$out/gemm4096_$blas.png" mb ratio_to_blas mode
  timing/plot_csv.sh "$out/gemm_kheavy_$blas.csv" "$out/gemm_kheavy_$blas.png" kb seconds mode
done
