# auto_vs_best.awk: per case, the best manual sweep point, the --tiles auto
# point (the median of its runs) and their ratio. Input lines (-F,):
#   case,tiles,manual|auto,seconds,predicted_seconds
# With -v rerun=1 the input is the alternating reruns of one manual point
# per case against auto: the manual time is then the median of its runs too.
# (used by run_tiles_auto_gemm.sh, run_tiles_auto_attention.sh and run_tiles_auto_gpt2.sh)
function median(v, n, key,   i, j, x) {
  for (i = 1; i <= n[key]; i++)
    for (j = i + 1; j <= n[key]; j++)
      if (v[key, j] < v[key, i]) { x = v[key, i]; v[key, i] = v[key, j]; v[key, j] = x }
  return n[key] % 2 ? v[key, (n[key] + 1) / 2] : (v[key, n[key] / 2] + v[key, n[key] / 2 + 1]) / 2
}
$3 == "manual" && (!($1 in best) || $4 < best[$1]) { best[$1] = $4; bt[$1] = $2 }
$3 == "manual" { m[$1, ++nm[$1]] = $4 }
$3 == "auto" { a[$1, ++na[$1]] = $4; at[$1] = $2; pred[$1] = $5 }
END {
  printf "%-24s %-18s %9s %-18s %9s %9s %10s\n", "case", rerun ? "best (median)" : "best sweep", "s", "auto", "s",
         "predicted", "auto/best"
  for (k in at) {
    med = median(a, na, k)
    b = rerun ? median(m, nm, k) : best[k]
    printf "%-24s %-18s %9.4f %-18s %9.4f %9.4f %10.3f\n", k, bt[k], b, at[k], med, pred[k], med / b
  }
}
