#!/usr/bin/env bash
# Run the benchmark suite from the repository root; every argument goes to pytest.
#   suite/benchmark_batched_dynamicemb_tables.sh --preset smoke -k TestGpu
#   suite/benchmark_batched_dynamicemb_tables.sh --collect-only -q --label cfr=0.8
# Long GPU runs exceed pytest's ini timeout (600 s), so the launcher lifts it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
exec "$PYTHON" -m pytest suite/benchmark_batched_dynamicemb_tables.py -o timeout=0 "$@"
