#!/usr/bin/env bash
# Run ON the offline GPU host, from the repository root, after fetch_offline.sh's folder
# (default .devcarry/) has been copied there. Installs, without network and without touching
# the host's own PyTorch:
#   - the wheels into SITE (default /tmp/embprof-site), to be put on PYTHONPATH;
#   - fbgemm-gpu, re-joined from its parts;
#   - libdw/libelf unpacked under SITE/sys, for the nsys bundled with Nsight Compute.
# Then prints the lines to `source` (env.sh under SITE does the same).
set -euo pipefail
src=${1:-.devcarry}
site=${SITE:-/tmp/embprof-site}
mkdir -p "$site/sys"
pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site")

if [ -d "$src/fbgparts" ] && ls "$src"/fbgparts/p_part*/part* >/dev/null 2>&1; then
    name=$(cat "$src/fbgparts/WHEEL_NAME" 2>/dev/null || echo fbgemm_gpu-1.6.0-cp312-cp312-manylinux_2_28_x86_64.whl)
    cat "$src"/fbgparts/p_part*/part* > "/tmp/$name"
    "${pip[@]}" "/tmp/$name"
    rm -f "/tmp/$name"
fi
[ -d "$src/whl" ] && "${pip[@]}" "$src"/whl/*.whl
for deb in "$src"/debs/*.deb; do dpkg -x "$deb" "$site/sys"; done

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
