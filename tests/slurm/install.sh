#!/usr/bin/env bash
# Installs Debian's SLURM (slurmctld, slurmd, the client commands) and munge
# for the one-node test cluster. Idempotent: does nothing when all are there.
# Exit status 77: they are missing and this user cannot install them.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
for cmd in slurmctld slurmd sbatch squeue sinfo munged munge unmunge; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "slurm install: missing ${missing[*]}; run as root or apt-get install slurm-wlm munge" >&2
    exit 77
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
