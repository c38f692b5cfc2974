#!/usr/bin/env bash
# On the GPU host: the library's CUDA tests under compute-sanitizer, to find a kernel that
# reads device memory nothing wrote (initcheck) or outside an allocation (memcheck).
#   bash tools/gpu_host/sanitize.sh OUT [PATCH...]
# PyTorch's caching allocator is off (PYTORCH_NO_CUDA_MEMORY_CACHING=1), so every tensor is
# an allocation of its own: a block reused from an earlier tensor would look written to
# initcheck and hide the read. With PATCHes (`git diff`s against this checkout), the tests run
# on a copy of the tree with all of them applied. TOOLS (default "initcheck memcheck") and
# TESTS (default: the engine's CUDA tests) choose what runs; one log per tool in OUT, and one
# line per tool to stdout: the test summary and how many errors the sanitizer counted.
set -uo pipefail
out=${1:?usage: sanitize.sh OUT [PATCH...]}
shift
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
[ -n "$sanitizer" ] || { echo "sanitize.sh: no compute-sanitizer on this host" >&2; exit 2; }
tree=$PWD
if [ $# -gt 0 ]; then
    tree=$(bash tools/gpu_host/patched_copy.sh "$@") || exit 2
    trap 'rm -rf "$tree"' EXIT
fi
tests=${TESTS:-tests/test_dynemb_engine.py -k cuda}
status=0
for tool in ${TOOLS:-initcheck memcheck}; do
    log="$out/$tool.log"
    # shellcheck disable=SC2086  # $tests is a pytest command line
    (cd "$tree" && PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH="$tree/src" \
        "$sanitizer" --tool "$tool" --print-limit 100 --error-exitcode 99 \
        python3 -m pytest -q -p no:cacheprovider -o timeout=0 $tests) > "$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    summary=$(grep -v "ERROR SUMMARY" "$log" | grep -E "[0-9]+ (passed|failed|error)" | tail -n 1)
    echo "$tool: rc=$rc; $summary; $(grep -E "ERROR SUMMARY" "$log" | tail -n 1)"
done
exit $status
