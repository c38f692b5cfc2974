#!/usr/bin/env bash
# On the GPU host, after install.sh: the checks CI cannot make. Writes logs and
# results into OUTDIR (default ./gpu-check): the library's tests on CUDA, the
# tables' speed against FBGEMM TBE at seed size, and the workflow end to end on
# the smoke preset with nsys (profile, export, breakdown, timing; figures are
# drawn where a browser exists, see README "On a GPU host").
set -uo pipefail
out=${1:-gpu-check}
mkdir -p "$out"
source "${SITE:-/tmp/embprof-site}/env.sh"
export PYTHONUNBUFFERED=1
status=0
step() {  # step NAME CMD...: run, log to $out/NAME.log, remember a failure
    local name=$1; shift
    echo "== $name: $*"
    local t0=$SECONDS
    "$@" > "$out/$name.log" 2>&1; local rc=$?
    echo "   rc=$rc in $((SECONDS - t0)) s"; tail -n 4 "$out/$name.log"
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"
step dynemb_tests python3 -m pytest -q -p no:cacheprovider -o timeout=0 tests/ -k "dynemb or embedding_collection" -rs
step bench_tables python3 benchmarks/bench_tables.py --json "$out/bench_tables.json"
step workflow_smoke_nsys python3 -m snakemake --cores "${CORES:-8}" report \
    --config preset=smoke profiler=nsys "nsys=$NSYS" --omit-from sunburst latency_plot report
tar czf "$out/results-smoke-nsys.tgz" --exclude='results/traces' --exclude='results/sqlite' results
exit $status
