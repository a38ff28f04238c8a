#!/usr/bin/env bash
# Quick start on a fresh Debian (bookworm) machine: install the dependencies,
# build, and run the main job. Until the GPT-2 driver lands the main job is
# the tiled GEMM benchmark: Tessera (ordered and REDUX accumulation) against
# one call of the same BLAS, as CSV plus a PNG plot.
set -euo pipefail
cd "$(dirname "$0")"
bash .ci/install-deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
./build/timing/time_gemm --m 2048 --n 2048 --k 2048 --tile 256,512 --mode ordered,redux \
  | tee build/quickstart_gemm.csv
timing/plot_csv.sh build/quickstart_gemm.csv build/quickstart_gemm.png mb ratio_to_blas mode
echo "plot: build/quickstart_gemm.png"
