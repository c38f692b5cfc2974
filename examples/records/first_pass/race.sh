#!/usr/bin/env bash
# On the GPU host (no install needed): the engine's CUDA tests with 2-plan-slots.patch applied,
# each way in a copy of its own, to tell a race with the host from a wrong kernel:
#   plain          as the suite runs them
#   blocking       CUDA_LAUNCH_BLOCKING=1 (each launch waits for the GPU)
#   nocaching      PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every free a cudaFree, which synchronises)
#   nolaunchcache  every launch through Triton's own path (dynemb's launch cache off)
#   nogc           Python's cyclic garbage collector off (gc.disable() before pytest starts)
#   bash examples/records/first_pass/race.sh OUT            # plain first, then the others at once
#   SEQUENTIAL=1 bash examples/records/first_pass/race.sh OUT  # plain twice, then one after another
#   COLD=1 bash examples/records/first_pass/race.sh OUT        # each run compiles its kernels afresh (an empty
#                                                              # TRITON_CACHE_DIR): plain, nogc, blocking, plain
out=${1:?usage: race.sh OUT}; mkdir -p "$out"
patch=examples/records/first_pass/patches/2-plan-slots.patch
tests() {  # tests NAME ENV...
    local name=$1; shift; local d; d=$(bash tools/gpu_host/patched_copy.sh "$patch") || return
    [ "${name%[0-9]}" != nolaunchcache ] || sed -i 's/compiled = _COMPILED.get(key)/compiled = None/' "$d/src/dynemb/kernels/triton_ops.py"
    local python=(python3 -m pytest)
    [ "${name%[0-9]}" != nogc ] || python=(python3 -c "import gc, sys, pytest; gc.disable(); sys.exit(pytest.main(sys.argv[1:]))")
    local cache=${TRITON_CACHE_DIR:-$HOME/.triton/cache}
    [ -z "${COLD:-}" ] || cache="$d/triton-cache"
    (cd "$d" && env "$@" TRITON_CACHE_DIR="$cache" PYTHONPATH="$d/src" timeout 150 "${python[@]}" -q -p no:cacheprovider -o timeout=0 \
        tests/test_dynemb_engine.py -k cuda) > "$out/$name.log" 2>&1
    echo "$name: $(tail -n 1 "$out/$name.log")"
    rm -rf "$d"
}
if [ -n "${COLD:-}" ]; then
    tests plain X=1; tests nogc X=1; tests blocking CUDA_LAUNCH_BLOCKING=1; tests plain2 X=1
elif [ -n "${SEQUENTIAL:-}" ]; then
    tests plain X=1; tests plain2 X=1
    tests blocking CUDA_LAUNCH_BLOCKING=1; tests nocaching PYTORCH_NO_CUDA_MEMORY_CACHING=1; tests nolaunchcache X=1
else
    tests plain X=1
    tests blocking CUDA_LAUNCH_BLOCKING=1 & tests nocaching PYTORCH_NO_CUDA_MEMORY_CACHING=1 & tests nolaunchcache X=1 &
    wait
fi
