# auto_vs_best.awk: per case, the best manual sweep point, the --tiles auto
# point (the median of its runs) and their ratio. Input lines (-F,):
#   case,tiles,manual|auto,seconds,predicted_seconds
# (used by run_tiles_auto_gemm.sh and run_tiles_auto_attention.sh)
function median(key,   i, j, x, m) {
  m = na[key]
  for (i = 1; i <= m; i++)
    for (j = i + 1; j <= m; j++)
      if (a[key, j] < a[key, i]) { x = a[key, i]; a[key, i] = a[key, j]; a[key, j] = x }
  return a[key, int((m + 1) / 2)]
}
$3 == "manual" && (!($1 in best) || $4 < best[$1]) { best[$1] = $4; bt[$1] = $2 }
$3 == "auto" { a[$1, ++na[$1]] = $4; at[$1] = $2; pred[$1] = $5 }
END {
  printf "%-24s %-18s %9s %-18s %9s %9s %10s\n", "case", "best sweep", "s", "auto", "s", "predicted", "auto/best"
  for (k in at) {
    m = median(k)
    printf "%-24s %-18s %9.4f %-18s %9.4f %9.4f %10.3f\n", k, bt[k], best[k], at[k], m, pred[k], m / best[k]
  }
}
