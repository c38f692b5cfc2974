#!/usr/bin/env bash
# Here, before shipping the working tree to the GPU host (which gets no .git): write
# .devcarry/source.env, which check_cuda.sh and run_example.sh source there, so that every
# record measured from the copy names this checkout's commit and whether it had changes
# (EMBPROF_GIT_COMMIT, EMBPROF_GIT_DIRTY; docs/DESIGN.md, "Provenance"). Carry the file with the call.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p .devcarry
dirty=0
[ -z "$(git status --porcelain --untracked-files=no)" ] || dirty=1
printf 'export EMBPROF_GIT_COMMIT=%s\nexport EMBPROF_GIT_DIRTY=%s\n' "$(git rev-parse HEAD)" "$dirty" > .devcarry/source.env
cat .devcarry/source.env
