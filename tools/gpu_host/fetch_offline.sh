#!/usr/bin/env bash
# Run on a machine WITH network: gathers what an offline CUDA host needs beyond its
# own PyTorch (see ../../README.md, "On a GPU host"), into DEST (default .devcarry/):
#   debs/       Debian's libdw1 + libelf1, which let Nsight Compute's bundled nsys import traces
#   fbgparts/   fbgemm-gpu (CUDA 13 build) split into parts small enough to move one at a time
#   whl/        torchrec, snakemake, plotly and their pure-Python dependencies (cp312)
# Copy DEST to the GPU host (all at once, or part folder by part folder), then run install.sh there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/../../.devcarry}
py=${GPU_PYTHON_VERSION:-3.12}
part_size=${PART_SIZE:-45M}
mkdir -p "$dest/debs" "$dest/whl" "$dest/fbgparts"
dest=$(cd "$dest" && pwd)
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
pipdl=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp
       "${platforms[@]}")

(cd "$dest/debs" && apt-get download libdw1 libelf1)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${pipdl[@]}" -d "$tmp" "fbgemm-gpu==${FBGEMM_GPU_VERSION:-1.6.0}"
rm -rf "$dest/fbgparts"/*
(cd "$dest/fbgparts" && split -b "$part_size" -d "$tmp"/fbgemm_gpu-*.whl part \
    && for f in part*; do mkdir "p_$f" && mv "$f" "p_$f/"; done)
basename "$tmp"/fbgemm_gpu-*.whl > "$dest/fbgparts/WHEEL_NAME"

"${pipdl[@]}" -d "$dest/whl" -r "$here/requirements-gpu-host.txt"
# Pure-Python packages published only as source: build their wheels here.
python3 -m pip wheel -q --no-deps -w "$dest/whl" -r "$here/requirements-gpu-host-sdist.txt"
echo "fetch_offline: wrote $dest"
