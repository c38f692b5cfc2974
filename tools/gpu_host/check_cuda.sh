#!/usr/bin/env bash
# On the GPU host, after install.sh: the checks CI cannot make. Writes logs and
# results into OUTDIR (default ./gpu-check): the library's tests on CUDA with the
# Triton kernels and with the torch path, the tables' speed against FBGEMM TBE at
# seed size on both paths, the per-op view of both paths, and the workflow's
# `measure` target on two smoke configs with nsys.
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
    echo "   rc=$rc in $((SECONDS - t0)) s"; grep -v -E "^\s*$|WARNING|_fbgemm_torch_compat|cannot determine|\[0m|\[33m" "$out/$name.log" | tail -n 12
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"
tests=(python3 -m pytest -q -p no:cacheprovider -o timeout=0 tests/ -k "dynemb or embedding_collection" -x)
step tests_triton "${tests[@]}"
step tests_torch env DYNEMB_KERNELS=torch "${tests[@]}"
step bench_tables_triton python3 benchmarks/bench_tables.py --json "$out/bench_tables_triton.json"
step bench_tables_torch env DYNEMB_KERNELS=torch python3 benchmarks/bench_tables.py --json "$out/bench_tables_torch.json"
step bench_table_ops_sgd python3 benchmarks/bench_table_ops.py --optimizer sgd --iterations 20
step workflow_smoke_nsys python3 -m snakemake measure --cores "$(nproc)" --set-threads profile="$(nproc)" \
    --config preset=smoke profiler=nsys "nsys=$NSYS" "labels=[_sgd_gpu_,_sgd_caching_pool=none_cap=4K_cfr=1.0]"
tar czf "$out/results-smoke-nsys.tgz" --exclude='results/traces' results 2>/dev/null
exit $status
