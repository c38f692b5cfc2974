#!/usr/bin/env bash
# On the GPU host: which of a change's parts fails there. Each PATCH (a `git diff`
# against this checkout) is applied alone to a copy of the tree, and the dynemb
# suites run on that copy in a fresh process; each part's log goes to OUT/<patch>.log
# and one line per part to stdout. Needs no fbgemm-gpu (the TBE comparisons skip).
#   bash tools/gpu_host/bisect_patches.sh OUT examples/records/first_pass/patches/*.patch
set -uo pipefail
out=${1:?usage: bisect_patches.sh OUT PATCH...}
shift
[ $# -gt 0 ] || { echo "bisect_patches.sh: no patch given" >&2; exit 2; }
mkdir -p "$out"
tests=${TESTS:-tests/test_dynemb_*.py}
for patch in "$@"; do
    name=$(basename "$patch" .patch)
    if ! tree=$(bash tools/gpu_host/patched_copy.sh "$patch" 2> "$out/$name.log"); then
        echo "$name: does not apply"
        continue
    fi
    # shellcheck disable=SC2086  # $tests is a glob, expanded in the copy
    (cd "$tree" && PYTHONPATH="$tree/src" python3 -m pytest -q -p no:cacheprovider $tests) >> "$out/$name.log" 2>&1
    echo "$name: $(tail -n 1 "$out/$name.log")"
    rm -rf "$tree"
done
