#!/usr/bin/env bash
# Regenerates the pinned locks from pyproject.toml in a scratch venv (needs the package index):
#   requirements.txt        the runtime: `pip install .`
#   requirements-bench.txt  beside it, the benchmark on the CPU: `.[bench]` and torchrec's dependencies
#   requirements-slurm.txt  the SLURM executor plugin (`.[slurm]`), installed apart by `make slurm`
#   requirements-dev.txt    the development tools (`.[dev]`)
# Each holds what its group adds to the ones before it. torch stays at the CPU build's
# version that this machine holds as a file (an unpinned torch is a CUDA build);
# torchrec is installed without its dependencies, at the version that matches fbgemm's
# (requirements-nodeps.txt, kept by hand).
set -euo pipefail
export LC_ALL=C  # one collation for sort and comm
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# Kept at their versions: torch's CPU build (a file on this machine) and the fbgemm built for it.
TORCH="$(grep -E '^torch==' requirements-bench.txt)"
FBGEMM="$(grep -E '^fbgemm_gpu-cpu==' requirements-bench.txt)"
TORCHREC_DEPS=(tensordict "torchmetrics==1.0.3" pyre-extensions)
SCRATCH="$(mktemp -d /tmp/embprof-lock.XXXXXX)"
trap 'rm -rf "$SCRATCH"' EXIT
"$PYTHON" -m venv "$SCRATCH/venv"
PIP=("$SCRATCH/venv/bin/pip" install -q --disable-pip-version-check)
freeze() { "$SCRATCH/venv/bin/pip" freeze --all --exclude pip --exclude embprof | sort; }

"${PIP[@]}" --upgrade setuptools  # the build backend of `pip install --no-build-isolation -e .`
"${PIP[@]}" .
freeze > "$SCRATCH/core"
"${PIP[@]}" ".[bench]" "$TORCH" "$FBGEMM" "${TORCHREC_DEPS[@]}"
freeze > "$SCRATCH/bench"
"${PIP[@]}" ".[slurm]"
freeze > "$SCRATCH/slurm"
"${PIP[@]}" ".[dev]"
freeze > "$SCRATCH/dev"

{ echo "# Runtime lock: what \`pip install .\` needs (the workflow, the breakdown, the figures, the"
  echo "# report; no torch). Regenerate all locks with \`make lock\` (tools/lock.sh)."
  cat "$SCRATCH/core"; } > requirements.txt
{ echo "# The benchmark suite on the CPU (\`pip install '.[bench]'\`), beside requirements.txt: torch's"
  echo "# CPU build and fbgemm's; torchrec's own dependencies (torchrec itself: requirements-nodeps.txt)."
  echo "# Regenerate with \`make lock\`."
  echo "$TORCH"
  comm -23 "$SCRATCH/bench" "$SCRATCH/core" | grep -v -E '^torch=='; } > requirements-bench.txt
{ echo "# The SLURM executor plugin, installed apart (\`make slurm\`: .venv/slurm) so that only runs with"
  echo '# the SLURM profile load it (docs/USAGE.md, "On a SLURM cluster"). Regenerate with `make lock`.'
  comm -23 "$SCRATCH/slurm" "$SCRATCH/bench"; } > requirements-slurm.txt
{ echo "# Development tools (\`pip install '.[dev]'\`), beside requirements.txt and requirements-bench.txt;"
  echo "# \`make test\` installs them. Regenerate with \`make lock\`."
  comm -23 "$SCRATCH/dev" "$SCRATCH/slurm"; } > requirements-dev.txt
echo "lock: wrote requirements.txt requirements-bench.txt requirements-slurm.txt requirements-dev.txt"
