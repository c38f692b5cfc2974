#!/usr/bin/env bash
# Run on a machine WITH network: gathers what an offline CUDA host needs beyond its
# own PyTorch (see docs/gpu_host.md) into DEST (default .devcarry/), as one payload
# split into parts small enough to move one at a time (PART_SIZE, default 48M):
#   payload: debs/        Debian's libdw1 + libelf1, which let Nsight Compute's bundled nsys import traces
#            fbgemm.tar.xz  fbgemm-gpu (CUDA 13 build), its wheel unpacked and xz-compressed (465 MB -> ~176 MB)
#            whl/          torchrec, snakemake, plotly and their pure-Python dependencies (cp312)
#   DEST/parts/p_partNN/partNN   the payload tar, split; DEST/parts/FBGEMM_VERSION
# Copy the part folders to the GPU host (one folder per transfer is fine) into one
# folder, then run install.sh there with that folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/../../.devcarry}
py=${GPU_PYTHON_VERSION:-3.12}
part_size=${PART_SIZE:-48M}
xz_level=${XZ_LEVEL:-6}  # 1 is several times faster on a busy machine, for a payload about a fifth larger
fbgemm=${FBGEMM_GPU_VERSION:-1.6.0}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
pipdl=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp
       "${platforms[@]}")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/payload/debs" "$tmp/payload/whl" "$tmp/wheel"
(cd "$tmp/payload/debs" && apt-get download libdw1 libelf1)
"${pipdl[@]}" -d "$tmp/wheel" "fbgemm-gpu==$fbgemm"
python3 -m zipfile -e "$tmp"/wheel/fbgemm_gpu-*.whl "$tmp/wheel/unpacked"
tar cf - -C "$tmp/wheel/unpacked" . | xz -T0 "-$xz_level" > "$tmp/payload/fbgemm.tar.xz"
"${pipdl[@]}" -d "$tmp/payload/whl" -r "$here/requirements-gpu-host.txt"
# Pure-Python packages published only as source: build their wheels here.
python3 -m pip wheel -q --no-deps -w "$tmp/payload/whl" -r "$here/requirements-gpu-host-sdist.txt"
rm -rf "$dest/parts" && mkdir -p "$dest/parts"
(cd "$dest/parts" && tar cf - -C "$tmp/payload" . | split -b "$part_size" -d - part \
    && for f in part*; do mkdir "p_$f" && mv "$f" "p_$f/"; done)
echo "$fbgemm" > "$dest/parts/FBGEMM_VERSION"
echo "fetch_offline: wrote $(ls -d "$dest"/parts/p_part* | wc -l) parts under $dest/parts"
