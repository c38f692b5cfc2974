#!/usr/bin/env bash
# On the GPU host, after install.sh: NVIDIA's own benchmark suite through the workflow (the
# example in examples/h200_nvidia/), from a recsys-examples checkout or its .tar.gz.
#   tools/gpu_host/run_nvidia_example.sh SOURCE OUT [STEP...]
# Steps (all by default, in this order; each continues where an interrupted run stopped):
#   build   NVIDIA's dynamicemb, sm_90, its off-GPU suites at CACHE_TOTAL_CAP rows (default 16M)
#           (build_dynamicemb.sh into /tmp/recsys-examples; its edits: OUT/EDITS)
#   trace   one small trace of its suite for the tests (TestGpu sgd, 3 iterations, the seed README's
#           nsys flags less the ones this nsys rejects): OUT/nvidia_testgpu_sgd.sqlite, with
#           nvtx_kern_sum and nsys_breakdown.py of it beside
#   measure run_example.sh with examples/h200_nvidia/config.yaml (EXTRA_CONFIG: more --config items,
#           e.g. "select=TestGpu" to measure those configs first);
#           then reference_breakdowns.sh: results/crosscheck/; results packed into OUT/results.tgz
set -uo pipefail
source_=${1:?usage: run_nvidia_example.sh SOURCE OUT [STEP...]}
out=${2:?usage: run_nvidia_example.sh SOURCE OUT [STEP...]}
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build trace measure)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
source "${SITE:-/tmp/embprof-site}/env.sh"
[ ! -f .devcarry/source.env ] || source .devcarry/source.env
export PYTHONUNBUFFERED=1
dest=/tmp/recsys-examples
bench="$dest/corelib/dynamicemb/benchmark"
for step in "${steps[@]}"; do
    t0=$SECONDS
    case $step in
        build)
            CACHE_TOTAL_CAP=${CACHE_TOTAL_CAP:-16777216} bash "$here/build_dynamicemb.sh" "$source_" "$dest" || exit 1
            cp "$dest/EDITS" "$out/EDITS" ;;
        trace)
            source "$dest/env.sh"
            label=T10_totalB1048570_D128_sgd_gpu_pool=none_cap=1677721
            work=$(mktemp -d)
            (cd "$bench" && "$NSYS" profile --output "$work/trace" --force-overwrite=true --sample=none --cpuctxsw=none \
                --trace=cuda,nvtx --cuda-graph-trace=node --cuda-flush-interval=100 --capture-range=cudaProfilerApi \
                --capture-range-end=repeat-shutdown:10 \
                python3 -m torch.distributed.run --nnodes 1 --nproc_per_node 1 -m pytest -svv -p no:cacheprovider \
                ./benchmark_batched_dynamicemb_tables.py --profile nsys -k "TestGpu and sgd" --num-iterations 3) \
                > "$out/trace.log" 2>&1 || { tail -n 20 "$out/trace.log"; exit 1; }
            "$NSYS" export --type sqlite --force-overwrite true --output "$out/nvidia_testgpu_sgd.sqlite" "$work/trace.nsys-rep" \
                >> "$out/trace.log" 2>&1 || { tail -n 5 "$out/trace.log"; exit 1; }
            mkdir -p "$work/r/sqlite" && cp "$out/nvidia_testgpu_sgd.sqlite" "$work/r/sqlite/$label.sqlite"
            bash "$here/reference_breakdowns.sh" "$bench" "$work/r" >> "$out/trace.log" 2>&1 || { tail -n 5 "$out/trace.log"; exit 1; }
            cp "$work/r/crosscheck/"*.csv "$out/"
            rm -rf "$work" ;;
        measure)
            CONFIG=examples/h200_nvidia/config.yaml bash "$here/run_example.sh" "$out"
            rc=$?
            bash "$here/reference_breakdowns.sh" "$bench" results > "$out/crosscheck.log" 2>&1 \
                || { tail -n 5 "$out/crosscheck.log"; rc=1; }
            tar czf "$out/results.tgz" --exclude='results/traces' --exclude='results/sqlite' results
            [ $rc -eq 0 ] || exit $rc ;;
        *) echo "run_nvidia_example: unknown step $step" >&2; exit 1 ;;
    esac
    echo "run_nvidia_example: $step done in $((SECONDS - t0)) s"
done
