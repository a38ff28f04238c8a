#!/usr/bin/env bash
# timing/llmc_cpu_cblas.sh on a stand-in llm.c checkout (testing/llmc_standin):
# the two matmuls are replaced, the program builds against the BLAS and its
# matmuls agree with llm.c's loops; a directory without train_gpt2.c is refused.
#   check_llmc_cpu_cblas.sh SCRIPT STANDIN_DIR [--blas-lib FILE --cblas-h FILE]
set -uo pipefail
script=$1 standin=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
if bash "$script" "$@" "$standin" "$work/out" > "$work/log" 2>&1 && (cd "$work/out" && ./train_gpt2_cblas); then
  for f in gpt2_tokenizer.bin dev/data/tinyshakespeare/tiny_shakespeare_train.bin llmc/utils.h; do
    [ -f "$work/out/$f" ] || { echo "FAIL: $f not put beside the program"; fails=$((fails + 1)); }
  done
else
  echo "FAIL: build or run:"; cat "$work/log"; fails=$((fails + 1))
fi
if bash "$script" "$@" "$work" "$work/out2" > "$work/log2" 2>&1 || ! grep -q "not an llm.c checkout" "$work/log2"; then
  echo "FAIL: a directory without train_gpt2.c was not refused"; cat "$work/log2"; fails=$((fails + 1))
fi
[ $fails -eq 0 ] && echo "llmc_cpu_cblas: all checks passed"
exit $((fails > 0))
