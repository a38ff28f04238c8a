#!/usr/bin/env bash
# Quick start on a fresh Debian (bookworm) machine: install the dependencies,
# build the project's StarPU 1.4 (once, about 2.5 min on 2 cores; cached under
# ~/.cache/tessera), build Tessera, and run the main job: a short GPT-2 training run (the small d2
# model, llm.c's random init, on the bundled tiny Shakespeare), printing
# losses, a validation loss and a generated sample. About 4 minutes on 2 cores
# the first time; the tests (ctest) then take about 9 minutes.
set -euo pipefail
cd "$(dirname "$0")"
bash .ci/install-deps
starpu=$(bash deps/starpu/build.sh)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSTARPU_DIR="$starpu"
cmake --build build -j"$(nproc)"
./build/algorithms/gpt2/tsr_gpt2 --model d2 --steps 40 --val-every 20 --sample-every 20 \
  --csv build/quickstart_gpt2.csv "$@"
