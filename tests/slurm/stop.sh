#!/usr/bin/env bash
# Stops the one-node test cluster that start.sh started: cancels its jobs,
# stops slurmd and slurmctld, and munged if start.sh started it. Idempotent.
# With --purge also removes its state and logs ($EMBPROF_SLURM_DIR) and its
# files in /etc/slurm.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
dir="${EMBPROF_SLURM_DIR:-/tmp/embprof-slurm}"
marker="# embprof test cluster (tests/slurm)"

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pidfile() {  # stop_pidfile FILE: SIGTERM, then SIGKILL after 10 s
    alive "$1" || return 0
    local pid i
    pid="$(cat "$1")"
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
}

if alive "$dir/slurmctld.pid"; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
fi
stop_pidfile "$dir/slurmd.pid"
stop_pidfile "$dir/slurmctld.pid"
if [ -f "$dir/munged.ours" ]; then
    stop_pidfile /run/munge/munged.pid
    rm -f "$dir/munged.ours"
fi
if [ "${1:-}" = "--purge" ]; then
    for name in slurm.conf gres.conf; do
        if [ -f "/etc/slurm/$name" ] && head -n1 "/etc/slurm/$name" | grep -qF "$marker"; then
            rm -f "/etc/slurm/$name"
        fi
    done
    rm -rf "$dir"
fi
