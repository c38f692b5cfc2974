#!/usr/bin/env bash
# On the GPU host, after install.sh: the checks and measurements CI cannot make.
#   tools/gpu_host/check_cuda.sh OUTDIR [STEP...]
# Writes one log per step into OUTDIR (default ./gpu-check), and the steps' records:
#   tests          the library's tests on CUDA with the Triton kernels
#   tests_torch    the same with the torch path (DYNEMB_KERNELS=torch)
#   bench_tables   the tables against FBGEMM TBE at seed size, every storage mode -> bench_tables.json
#   bench_ops      the per-op view of the HBM tables (bench_table_ops.py)
#   suite          the benchmark suite at the seed preset, 16M rows off the GPU, timing only,
#                  all 10 configs in one run -> suite.json (the records as the suite writes them)
#   profile        the workflow's per-op CSVs (nsys) of the configs in PROFILE_LABELS
#                  (default: sgd no_caching and adam no_hbm) -> results-profile.tgz
#   bisect         the dynemb suites with each of PATCHES alone (bisect_patches.sh; default: the
#                  patches waiting in examples/records/first_pass/patches/, some 110 s each)
#                  -> bisect/<patch>.log
#   sanitize       the engine's CUDA tests under compute-sanitizer's initcheck and memcheck, the
#                  caching allocator off (sanitize.sh; TESTS, TOOLS) -> sanitize/<tool>.log
#   suite_nv       NVIDIA's dynamicemb built from UPSTREAM (a recsys-examples checkout or .tar.gz;
#                  build_dynamicemb.sh), then the suite as `suite` with it as a third backend (nv),
#                  RUNS times (default 3), each in a process of its own -> suite_nv_run<k>.json
# With no STEP, all of them but bisect, sanitize and suite_nv, in this order. A step's failure is reported and the others still run.
set -uo pipefail
out=${1:-gpu-check}
shift || true
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests tests_torch bench_tables bench_ops suite profile)
mkdir -p "$out"
source "${SITE:-/tmp/embprof-site}/env.sh"
# The commit of this copy of the checkout (tools/gpu_host/stamp.sh wrote it where git is).
[ ! -f .devcarry/source.env ] || source .devcarry/source.env
export PYTHONUNBUFFERED=1
status=0
step() {  # step NAME CMD...: run, log to $out/NAME.log, remember a failure
    local name=$1; shift
    echo "== $name: $*"
    local t0=$SECONDS
    "$@" > "$out/$name.log" 2>&1; local rc=$?
    echo "   rc=$rc in $((SECONDS - t0)) s"; grep -v -E "^\s*$|WARNING|_fbgemm_torch_compat|cannot determine|\[0m|\[33m" "$out/$name.log" | tail -n 14
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"
# The library's test files only: collecting the others imports what the host lacks (sqlite-utils).
tests=(python3 -m pytest -q -p no:cacheprovider -o timeout=0 -x tests/test_dynemb_*.py tests/test_embedding_collection_*.py)
labels=${PROFILE_LABELS:-T10_totalB1048570_D128_sgd_no_caching_pool=none_cap=1638K T10_totalB1048570_D128_adam_no_hbm_pool=none_cap=1638K}
for name in "${steps[@]}"; do
    case $name in
        tests) step tests "${tests[@]}" ;;
        tests_torch) step tests_torch env DYNEMB_KERNELS=torch "${tests[@]}" ;;
        bench_tables) step bench_tables python3 benchmarks/bench_tables.py --json "$out/bench_tables.json" ;;
        bench_ops) step bench_ops python3 benchmarks/bench_table_ops.py --optimizer sgd --iterations 20 ;;
        suite) step suite python3 -m pytest suite/benchmark_batched_dynamicemb_tables.py -q -p no:cacheprovider -o timeout=0 \
                   --preset seed --total-cap 16777216 --results-file "$out/suite.json" ;;
        profile)
            targets=()
            for label in $labels; do targets+=("results/opcalls/opcalls__$label.csv"); done
            step profile python3 -m snakemake "${targets[@]}" --cores "$(nproc)" --set-threads profile="$(nproc)" \
                --configfile examples/h200/config.yaml --config "nsys=$NSYS"
            tar czf "$out/results-profile.tgz" --exclude='results/traces' --exclude='results/sqlite' results 2>/dev/null ;;
        bisect)
            # shellcheck disable=SC2086  # PATCHES is a glob
            step bisect bash tools/gpu_host/bisect_patches.sh "$out/bisect" ${PATCHES:-examples/records/first_pass/patches/*.patch} ;;
        sanitize) step sanitize bash tools/gpu_host/sanitize.sh "$out/sanitize" ;;
        suite_nv)
            step build_dynamicemb bash tools/gpu_host/build_dynamicemb.sh "${UPSTREAM:?UPSTREAM: a recsys-examples checkout or .tar.gz}"
            for k in $(seq 1 "${RUNS:-3}"); do
                step "suite_nv_run$k" env PYTHONPATH="/tmp/recsys-examples/corelib/dynamicemb:$PYTHONPATH" \
                    python3 -m pytest suite/benchmark_batched_dynamicemb_tables.py -q -p no:cacheprovider -o timeout=0 \
                    --preset seed --total-cap 16777216 --results-file "$out/suite_nv_run$k.json"
            done ;;
        *) echo "check_cuda: unknown step $name" >&2; status=1 ;;
    esac
done
exit $status
