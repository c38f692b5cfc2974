#!/usr/bin/env bash
# Installs the Debian packages the project needs beyond Python, named by the commands given
# (default: chromium, for kaleido's static export and the report's browser test; the tests
# also need sqlite3, the shell docs/database.md's example queries use). Idempotent: does
# nothing when every command is present.
set -euo pipefail
need=()
for command in "${@:-chromium}"; do
    command -v "$command" >/dev/null 2>&1 || need+=("$command")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "system-deps: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
