#!/usr/bin/env bash
# Configures and starts a one-node SLURM cluster on localhost (munged,
# slurmctld, slurmd) with the `cpu` and `gpu` partitions that
# profiles/slurm names. Idempotent: running daemons with an unchanged
# configuration are left alone. The configuration goes to /etc/slurm (only
# where no other SLURM configuration is there); state, logs and pid files to
# $EMBPROF_SLURM_DIR (default /tmp/embprof-slurm).
# Exit status 77: not root, so no cluster can be started here.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
here="$(cd "$(dirname "$0")" && pwd)"
dir="${EMBPROF_SLURM_DIR:-/tmp/embprof-slurm}"
etc=/etc/slurm
marker="# embprof test cluster (tests/slurm)"
host="$(hostname -s)"

die() { echo "slurm start: $*" >&2; exit 1; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll COMMAND every 0.5 s
    local limit="$1" what="$2"; shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || die "$what not ready after ${limit} s; logs in $dir/log"
        sleep 0.5
    done
}

if [ "$(id -u)" -ne 0 ]; then
    echo "slurm start: must run as root (slurmd starts jobs as their users)" >&2
    exit 77
fi
for cmd in slurmctld slurmd sinfo scontrol munged; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found; run tests/slurm/install.sh first"
done
for name in slurm.conf gres.conf; do
    if [ -e "$etc/$name" ] && ! head -n1 "$etc/$name" | grep -qF "$marker"; then
        die "$etc/$name belongs to another SLURM set-up; not overwriting it"
    fi
done
mkdir -p "$etc" "$dir/state" "$dir/spool" "$dir/log"

changed=0
for name in slurm.conf gres.conf; do
    sed -e "s|@HOST@|$host|g" -e "s|@DIR@|$dir|g" "$here/$name.in" > "$etc/$name.new"
    if cmp -s "$etc/$name.new" "$etc/$name"; then
        rm "$etc/$name.new"
    else
        mv "$etc/$name.new" "$etc/$name"
        changed=1
    fi
done
if [ $changed -eq 1 ] && { alive "$dir/slurmctld.pid" || alive "$dir/slurmd.pid"; }; then
    echo "slurm start: configuration changed, restarting the daemons" >&2
    "$here/stop.sh"
fi

# munge authenticates every SLURM message; a running munged is reused.
munge_works() { munge -n | unmunge; }
if ! munge_works >/dev/null 2>&1; then
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- munged
    touch "$dir/munged.ours"
    wait_for 10 munged munge_works
fi

alive "$dir/slurmctld.pid" || slurmctld
wait_for 20 slurmctld scontrol ping
alive "$dir/slurmd.pid" || slurmd
node_up() { sinfo -h -n "$host" -o %t | grep -qE '^(idle|mix|alloc)'; }
wait_for 30 "node $host" node_up
