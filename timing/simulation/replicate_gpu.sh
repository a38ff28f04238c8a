#!/usr/bin/env bash
# replicate_gpu.sh: turn the bus models of a one-GPU node (a copy of
# perfmodels/NAME/bus, which StarPU on SimGrid reads) into those of a node of
# N such GPUs, for simulate.sh --gpus N --gpu-link GBPS. Each copy CUDAi gets
# its own path to host memory as measured for CUDA0 (its own copies of every
# link of CUDA0's routes; the host interconnect, shared, N times as wide), and
# a link each way to a switch of GBPS GB/s that joins the GPUs (NVLink and
# NVSwitch: about 450 GB/s each way per H200). A copy between GPUs pays the
# latency measured between host and GPU once, as the scheduler's table says
# (on the link into the switch; the link out of it has none). The
# scheduler's bandwidth and latency tables, the GPUs' NUMA affinity and the
# node's GPU count follow. The codelet models
# need no change where StarPU times every GPU by CUDA0's models
# (STARPU_PERF_MODEL_HOMOGENEOUS_CUDA=1, which simulate.sh sets).
#
#   timing/simulation/replicate_gpu.sh BUS_DIR NAME N GBPS
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BUS_DIR NAME N GBPS" >&2; exit 2; }
dir=$1 name=$2 n=$3 gbps=$4
[[ $n =~ ^[1-9][0-9]?$ ]] && [ "$n" -le 16 ] || { echo "replicate_gpu: N '$n': 1 to 16" >&2; exit 2; }
[[ $gbps =~ ^[1-9][0-9]{0,4}$ ]] || { echo "replicate_gpu: GBPS '$gbps': a whole number of GB/s, 1 to 99999" >&2; exit 2; }
xml=$dir/$name.platform.v4.xml cfg=$dir/$name.config
[ "$(sed -n 's/^\([0-9]*\) # Number of CUDA nodes.*/\1/p' "$cfg")" = 1 ] ||
    { echo "replicate_gpu: $cfg: the models must come from a node with one GPU" >&2; exit 2; }
grep -q '<host id="CUDA0"' "$xml" || { echo "replicate_gpu: no CUDA0 host in $xml" >&2; exit 2; }

# The platform: hosts, links and routes of CUDA0 copied for CUDA1..N-1; the
# links of CUDA0's routes (but the shared Interconnect) renamed per copy;
# the switch's links before the first route, the GPU-to-GPU routes last.
awk -v n="$n" -v bw="${gbps}000000000" '
function replace(s, from, to,   out, p) { # every literal from in s by to
    out = ""
    while ((p = index(s, from)) > 0) { out = out substr(s, 1, p - 1) to; s = substr(s, p + length(from)) }
    return out s
}
function copy(line, i,   l, k) {
    l = replace(line, "CUDA0", "CUDA" i)
    for (k in own) l = replace(l, "\"" k "\"", "\"" k " #" i "\"")
    return l
}
FNR == NR { # first pass: the links of CUDA0s routes, and its latency to the host
    if ($0 ~ /<route src="CUDA0"|<route src="RAM" dst="CUDA0"/) in_route = 1
    if (in_route && match($0, /link_ctn id="[^"]*"/)) {
        id = substr($0, RSTART + 13, RLENGTH - 14)
        if (id != "Interconnect" && id !~ /CUDA0/) own[id] = id
    }
    if ($0 ~ /<\/route>/) in_route = 0
    if ($0 ~ /<link id="CUDA0-RAM"/ && match($0, /latency="[^"]*"/)) lat = substr($0, RSTART + 9, RLENGTH - 10)
    next
}
/<host id="CUDA0"/ { block = 1; text = "" }
block { text = text $0 "\n"; if ($0 ~ /<\/host>/) { printf "%s", text; for (i = 1; i < n; i++) printf "%s", copy(text, i); block = 0 }; next }
/<link id="Interconnect"/ { match($0, /bandwidth="[0-9.]*/); b = substr($0, RSTART + 11, RLENGTH - 11)
    sub(/bandwidth="[0-9.]*/, sprintf("bandwidth=\"%f", b * n)); print; next }
/<link id=/ { print; id = $0; sub(/.*<link id="/, "", id); sub(/".*/, "", id)
    if (id ~ /CUDA0/ || id in own) for (i = 1; i < n; i++) print copy($0, i)
    next }
/<route / && !switch_links++ { # SimGrid wants every link declared before the routes
    for (i = 0; i < n; i++) {
        printf "   <link id=\"CUDA%d-switch\" bandwidth=\"%sBps\" latency=\"%s\"/>\n", i, bw, lat
        printf "   <link id=\"switch-CUDA%d\" bandwidth=\"%sBps\" latency=\"0s\"/>\n", i, bw
    }
}
/<route src="CUDA0"|<route src="RAM" dst="CUDA0"/ { route = 1; text = "" }
route { text = text $0 "\n"; if ($0 ~ /<\/route>/) { printf "%s", text; for (i = 1; i < n; i++) printf "%s", copy(text, i); route = 0 }; next }
/<\/AS>/ {
    for (i = 0; i < n; i++) for (j = 0; j < n; j++) if (i != j)
        printf "   <route src=\"CUDA%d\" dst=\"CUDA%d\" symmetrical=\"NO\"><link_ctn id=\"CUDA%d-switch\"/><link_ctn id=\"switch-CUDA%d\"/></route>\n", i, j, i, j
}
{ print }' "$xml" "$xml" > "$xml.new"
mv "$xml.new" "$xml"

# The scheduler's tables (row: from, column: to; NUMA0, then CUDA0, CUDA1, ...):
# bandwidth in MB/s, latency in us; host <-> CUDAi as host <-> CUDA0
table() { # table FILE GPU_TO_GPU_VALUE
    awk -v n="$n" -v g="$2" -F'\t' -v OFS='\t' '
    NR == 1 { h = "# to NUMA 0"; for (i = 0; i < n; i++) h = h "\tto CUDA " i; print h "\t"; next }
    NR == 2 { for (c = 1; c <= NF; c++) r0[c] = $c; nf = NF; next }
    NR == 3 { for (c = 1; c <= NF; c++) r1[c] = $c; next }
    NR > 3 + n - 1 { rest[NR] = $0; last = NR; next }
    END {
        for (r = 0; r <= n; r++) {
            line = ""
            for (c = 1; c <= nf; c++) {
                v = r1[c]                                   # beyond the nodes: as measured (nan)
                if (c - 1 > n) v = r0[c]
                else if (r == 0) v = c == 1 ? r0[1] : r0[2]  # host -> GPU c-2
                else if (c == 1) v = r1[1]                   # GPU -> host
                else v = c - 2 == r - 1 ? r1[2] : g          # GPU -> itself, GPU -> GPU
                line = line (c > 1 ? "\t" : "") v
            }
            print line
        }
        for (r = 4 + n - 1; r <= last; r++) if (r in rest) print rest[r]
    }' "$1" > "$1.new"
    mv "$1.new" "$1"
}
lat_us=$(awk -F'\t' 'NR == 3 { print $1 }' "$dir/$name.latency")
table "$dir/$name.bandwidth" "$(printf '%e' "${gbps}000")"
table "$dir/$name.latency" "$lat_us"
{ echo "# GPU	NUMA0	"; for ((i = 0; i < n; i++)); do echo "$i	0	"; done; } > "$dir/$name.affinity"
sed -i "s/^1 # Number of CUDA nodes/$n # Number of CUDA nodes/" "$cfg"
