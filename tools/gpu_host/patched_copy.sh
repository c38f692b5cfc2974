#!/usr/bin/env bash
# On the GPU host: a copy of this checkout's tree in a new temporary folder, with each PATCH
# (a `git diff` against the checkout) applied in turn; prints the folder. The copy leaves out
# what a test run needs not (.git, .venv, .devcarry, examples, results, .snakemake).
#   tree=$(bash tools/gpu_host/patched_copy.sh [PATCH...])
# A patch that does not apply: one line on stderr, the folder removed, exit 2.
set -euo pipefail
tree=$(mktemp -d "${TMPDIR:-/tmp}/patched.XXXX")
tar cf - --exclude=./.git --exclude=./.venv --exclude=./.devcarry --exclude=./examples --exclude=./results --exclude=./.snakemake . \
    | tar xf - -C "$tree"
for patch in "$@"; do
    # git apply works outside a repository too
    if ! git -C "$tree" apply --recount "$PWD/$patch" >&2; then
        echo "patched_copy.sh: $patch does not apply" >&2
        rm -rf "$tree"
        exit 2
    fi
done
echo "$tree"
