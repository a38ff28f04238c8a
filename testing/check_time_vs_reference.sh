#!/bin/bash
# timing/time_gpt2_vs_reference.sh against a stand-in reference that prints
# llm.c's CUDA step lines forever: the script must read its losses and step
# times, stop it after --steps steps, time tsr_gpt2 and write the CSV (and the
# PNG when gnuplot is there).
#   check_time_vs_reference.sh SCRIPT TSR_GPT2 WORKDIR
set -u
script=$1 exe=$2 work=$3
rm -rf "$work" && mkdir -p "$work/ref"
fails=0
ok() { :; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

cat > "$work/ref/fake_llmc.sh" <<'STUB'
#!/bin/bash
# llm.c train_gpt2_fp32.cu's step lines: loss 11 - step/10, 20 ms a step (30 on step 1)
echo $$ > fake_llmc.pid
echo "| device                | stand-in                                           |"
for s in $(seq 1 100000); do
  ms=20.000000; [ "$s" = 1 ] && ms=30.000000
  awk -v s="$s" -v ms="$ms" 'BEGIN { printf "step %4d/74: train loss %f (%s ms, 12800 tok/s)\n", s, 11 - s / 10, ms }'
  sleep 0.02
done
STUB
chmod +x "$work/ref/fake_llmc.sh"

bash "$script" --exe "$exe" --model d2 -B 4 -T 64 --steps 5 --reference ./fake_llmc.sh --ref-dir "$work/ref" \
     --out "$work/out" > "$work/log" 2>&1 || bad "the script failed: $(tail -3 "$work/log")"
[ "$(wc -l < "$work/out.csv" 2>/dev/null)" = 3 ] && ok || bad "CSV rows: $(cat "$work/out.csv" 2>/dev/null)"
ref_row=$(grep '^reference,' "$work/out.csv" 2>/dev/null)
[ "$(cut -d, -f5,6,9,10 <<< "$ref_row")" = "5,20,10.900000,10.500000" ] && ok ||
    bad "reference row (steps 5, median 20 ms without the first step, losses 10.9 .. 10.5): $ref_row"
tes_row=$(grep '^tessera,' "$work/out.csv" 2>/dev/null)
awk -F, '{ exit !($6 > 0 && $7 > 0 && $9 == "10.828328" && $11 > 0) }' <<< "$tes_row" && ok ||
    bad "tessera row (median ms, tokens/ms, llm.c's first d2 loss, ratio): $tes_row"
kill -0 "$(cat "$work/ref/fake_llmc.pid")" 2>/dev/null && bad "the reference still runs after --steps steps"
grep -q "tessera / reference: [0-9.]*x" "$work/log" && ok || bad "no ratio line: $(tail -2 "$work/log")"
if command -v gnuplot > /dev/null; then
  [ "$(head -c 4 "$work/out.png" 2>/dev/null | tail -c 3)" = PNG ] && ok || bad "no PNG"
fi
bash "$script" --exe "$exe" > /dev/null 2>&1 && bad "no --reference accepted"
# a reference that fails before its first step (llm.c's fp32 trainer at B16
# T1024): a clear error with the end of its output, not a silent exit
printf '#!/bin/bash\necho "[CUDA ERROR] an illegal memory access was encountered"; exit 1\n' > "$work/ref/crash.sh"
chmod +x "$work/ref/crash.sh"
bash "$script" --exe "$exe" --model d2 -B 4 -T 64 --steps 3 --reference ./crash.sh --ref-dir "$work/ref" \
     --out "$work/crash" > "$work/crash.log" 2>&1 && bad "a reference with no step line accepted"
grep -q "printed 0 step line" "$work/crash.log" && grep -q "illegal memory access" "$work/crash.log" && ok ||
    bad "no clear error for a failed reference: $(tail -3 "$work/crash.log")"
[ $fails -eq 0 ] && echo "time_gpt2_vs_reference: all checks passed"
exit $((fails > 0))
