#!/usr/bin/env bash
# On the GPU host, after install.sh: build NVIDIA's dynamicemb from a recsys-examples checkout, as
# its users do (python3 setup.py build_ext --inplace), in a copy with the edits an offline host
# needs (tools/gpu_host/dynamicemb_edits.py says which; they are printed and kept in DEST/EDITS).
#   tools/gpu_host/build_dynamicemb.sh SOURCE [DEST]
# SOURCE: a recsys-examples checkout, or a .tar.gz of one (or of its corelib/dynamicemb).
# DEST (default /tmp/recsys-examples, outside this checkout, so that pytest does not take this
# project's pyproject.toml for the suite's config): the copy; its corelib/dynamicemb holds the built
# extension, and DEST/env.sh the lines to `source` before running its suite:
#   DYNAMICEMB_DIR (its corelib/dynamicemb) and PYTHONPATH with it first.
# Environment: ARCH (default 90), CACHE_TOTAL_CAP (rows of the off-GPU suites in all; default
# upstream's 256M), MAX_JOBS (default: the cores). A copy already built from the same source with the
# same edits is kept (about 3.5 minutes saved).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_=${1:?usage: build_dynamicemb.sh SOURCE [DEST]}
dest=${2:-/tmp/recsys-examples}
arch=${ARCH:-90}
edits=(--arch "$arch")
[ -z "${CACHE_TOTAL_CAP:-}" ] || edits+=(--cache-total-cap "$CACHE_TOTAL_CAP")
stamp="$(sha256sum "$source_" 2>/dev/null | cut -c1-16 || echo dir) ${edits[*]}"
lib="$dest/corelib/dynamicemb"

if [ -f "$dest/BUILT" ] && [ "$(cat "$dest/BUILT")" = "$stamp" ] && ls "$lib"/dynamicemb_extensions*.so >/dev/null 2>&1; then
    echo "build_dynamicemb: $lib is built already ($stamp)"
else
    rm -rf "$dest" && mkdir -p "$dest"
    if [ -d "$source_" ]; then
        mkdir -p "$dest/corelib" && cp -r "$source_/corelib/dynamicemb" "$dest/corelib/"
        [ ! -f "$source_/LICENSE" ] || cp "$source_/LICENSE" "$dest/"
    else
        tar xzf "$source_" -C "$dest"
    fi
    [ -f "$lib/setup.py" ] || { echo "build_dynamicemb: $source_ holds no corelib/dynamicemb/setup.py" >&2; exit 1; }
    python3 "$here/dynamicemb_edits.py" "$lib" "${edits[@]}" | tee "$dest/EDITS"
    t0=$SECONDS
    (cd "$lib" && MAX_JOBS=${MAX_JOBS:-$(nproc)} python3 setup.py build_ext --inplace) > "$dest/build.log" 2>&1 \
        || { tail -n 20 "$dest/build.log"; echo "build_dynamicemb: the build failed; see $dest/build.log" >&2; exit 1; }
    echo "build_dynamicemb: built in $((SECONDS - t0)) s"
    echo "$stamp" > "$dest/BUILT"
fi
lib=$(cd "$lib" && pwd)
cat > "$dest/env.sh" <<ENV
export DYNAMICEMB_DIR=$lib
export PYTHONPATH=$lib\${PYTHONPATH:+:\$PYTHONPATH}
ENV
# shellcheck disable=SC1091
source "$dest/env.sh"
python3 -c "import dynamicemb, dynamicemb_extensions; print('build_dynamicemb: dynamicemb imports from', dynamicemb.__path__[0])"
