#!/usr/bin/env bash
# Run ON the offline GPU host, from the repository root, after fetch_offline.sh's parts
# have been copied there into one folder PARTS (default .devcarry/parts; the p_partNN
# folders or their partNN files). Installs, without network and without touching the
# host's own PyTorch:
#   - fbgemm-gpu (its unpacked wheel) and the wheels into SITE (default /tmp/embprof-site), for PYTHONPATH;
#   - libdw/libelf unpacked under SITE/sys, for the nsys bundled with Nsight Compute.
# Then writes SITE/env.sh, the lines to `source` before running anything.
set -euo pipefail
parts=${1:-.devcarry/parts}
site=${SITE:-/tmp/embprof-site}
mkdir -p "$site/sys"
pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site")
payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
# In the order of their names (part00, part01, ...), wherever each lies under PARTS.
files=$(find "$parts" -type f -name 'part[0-9]*' -printf '%f\t%p\n' | LC_ALL=C sort | cut -f2)
[ -n "$files" ] || { echo "install: no parts under $parts" >&2; exit 1; }
# shellcheck disable=SC2086
cat $files | tar xf - -C "$payload"
python3 - "$payload/fbgemm.tar.xz" "$site" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as archive:
    archive.extractall(sys.argv[2], filter="data")
PY
"${pip[@]}" "$payload"/whl/*.whl
for deb in "$payload"/debs/*.deb; do dpkg -x "$deb" "$site/sys"; done

# The workflow's rules run the `embprof` command: this checkout's package, from src/ on PYTHONPATH.
mkdir -p "$site/bin"
printf '#!/bin/sh\nexec python3 -m embprof "$@"\n' > "$site/bin/embprof"
chmod +x "$site/bin/embprof"

nsys=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | tail -n 1)}
cat > "$site/env.sh" <<ENV
export PYTHONPATH=$site:$(pwd)/src\${PYTHONPATH:+:\$PYTHONPATH}
export LD_LIBRARY_PATH=$site/sys/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PATH=$site/bin:\$PATH
export NSYS=$nsys
ENV
echo "install: done; now: source $site/env.sh"
