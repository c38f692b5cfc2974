#!/usr/bin/env bash
# On the GPU host, after a workflow run with profiler nsys: for every profiled config, the per-op
# breakdowns users already have, beside the workflow's, so that `embprof checks` can hold them
# against each other per op (CHECKS.md, "Per op against Nsight Systems and NVIDIA's script"):
#   results/crosscheck/nvtx_kern_sum__<label>.csv   Nsight Systems' `nsys stats -r nvtx_kern_sum`
#   results/crosscheck/nsys_breakdown__<label>.csv  NVIDIA's benchmark/nsys_breakdown.py (dyn rows)
#   tools/gpu_host/reference_breakdowns.sh UPSTREAM_BENCHMARK_DIR [RESULTS]
# UPSTREAM_BENCHMARK_DIR: recsys-examples' corelib/dynamicemb/benchmark (nsys_breakdown.py is run
# from there, as its users run it); nsys from $NSYS, else PATH.
set -euo pipefail
upstream=${1:?usage: reference_breakdowns.sh UPSTREAM_BENCHMARK_DIR [RESULTS]}
results=${2:-results}
nsys=${NSYS:-$(command -v nsys)}
out="$results/crosscheck"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shopt -s nullglob
exports=("$results"/sqlite/*.sqlite)
[ ${#exports[@]} -gt 0 ] || { echo "reference_breakdowns: no exports under $results/sqlite" >&2; exit 1; }
for db in "${exports[@]}"; do
    label=$(basename "$db" .sqlite)
    [ -s "$db" ] || continue  # a failed config's empty export
    "$nsys" stats --report nvtx_kern_sum --format csv --force-export=false --force-overwrite=true \
        --output "$work/$label" "$db" > "$work/stats.log" 2>&1 \
        || { tail -n 5 "$work/stats.log"; echo "reference_breakdowns: nsys stats failed on $db" >&2; exit 1; }
    mv "$work/${label}_nvtx_kern_sum.csv" "$out/nvtx_kern_sum__$label.csv"
    # nsys_breakdown.py takes an .nsys-rep and reuses the export beside it when that is newer:
    # an old empty stand-in for the report, and the workflow's export beside it.
    mkdir -p "$work/$label" && touch -d 2000-01-01 "$work/$label/$label.nsys-rep"
    ln -s "$(cd "$(dirname "$db")" && pwd)/$(basename "$db")" "$work/$label/$label.sqlite"
    (cd "$upstream" && PATH="$(dirname "$nsys"):$PATH" python3 nsys_breakdown.py "$work/$label/$label.nsys-rep" \
        --out-dir "$work/$label/out") > "$work/breakdown.log" 2>&1 \
        || { tail -n 5 "$work/breakdown.log"; echo "reference_breakdowns: nsys_breakdown.py failed on $db" >&2; exit 1; }
    mv "$work/$label/out"/opcalls__*.csv "$out/nsys_breakdown__$label.csv"
    echo "reference_breakdowns: $label"
done
