#!/usr/bin/env bash
# On the GPU host, after install.sh: run the workflow's `measure` target (profile
# with nsys, export, breakdown, timing, bandwidth; no figures, since the host has
# no browser) with CONFIG (default examples/h200/config.yaml), then pack results/
# without the traces into OUT/results.tgz. On a machine with a browser:
#   tar xzf results.tgz && snakemake --cores 1 report --configfile CONFIG
# draws the figures and the report from the measured files (nothing re-runs:
# Snakemake does not redo steps whose outputs exist when only their traces are gone).
# EXTRA_CONFIG: more `--config` items (e.g. "select=TestGpu" for a part of the configs first).
# UPSTREAM: a recsys-examples checkout or .tar.gz; NVIDIA's dynamicemb is built from it first
# (build_dynamicemb.sh, into /tmp/recsys-examples, where the example's config looks for the
# suite's third backend; a copy built from the same source is kept).
# Stopped part-way (a lease's time limit), the same call continues: finished
# steps stay done and an interrupted one runs again (--rerun-incomplete); after
# a kill that left Snakemake's lock, `python3 -m snakemake --unlock` first.
set -uo pipefail
config=${CONFIG:-examples/h200/config.yaml}
out=${1:-gpu-example}
mkdir -p "$out"
source "${SITE:-/tmp/embprof-site}/env.sh"
# The commit of this copy of the checkout (tools/gpu_host/stamp.sh wrote it where git is).
[ ! -f .devcarry/source.env ] || source .devcarry/source.env
export PYTHONUNBUFFERED=1
if [ -n "${UPSTREAM:-}" ]; then
    bash "$(dirname "$0")/build_dynamicemb.sh" "$UPSTREAM" > "$out/build_dynamicemb.log" 2>&1 \
        || { tail -n 20 "$out/build_dynamicemb.log"; exit 1; }
    tail -n 1 "$out/build_dynamicemb.log"
fi
cores=$(nproc)
# GPU jobs run one at a time (timing asks for every core already); CPU steps in parallel.
python3 -m snakemake measure --cores "$cores" --set-threads profile="$cores" --keep-going --rerun-incomplete \
    --configfile "$config" --config "nsys=$NSYS" ${EXTRA_CONFIG:-} > "$out/snakemake.log" 2>&1
rc=$?
tail -n 25 "$out/snakemake.log"
tar czf "$out/results.tgz" --exclude='results/traces' --exclude='results/sqlite' results
exit $rc
