#!/usr/bin/env bash
# Multi-GPU EmbeddingCollection benchmark (issue 9), the reference system's launcher signature:
#   suite/benchmark_embedding_collection.sh [use_index_dedup] [use_dynamic_embedding] [batch_size] [flags...]
# Defaults: True True 65536. Flags after the third argument go to the entry point
# (python -m suite.embedding_collection --help), e.g. --rows-scale 0.25 --iterations 20.
# One process per visible GPU (NCCL); without a GPU, 2 processes on the CPU (gloo).
# NPROC overrides the process count. The record is appended to --results-file
# (default results/embedding_collection_results.json).
# RANK_WRAPPER: a command each rank runs under, e.g. one nsys per rank with --profile nsys:
#   RANK_WRAPPER='nsys profile --trace=cuda,nvtx --capture-range=cudaProfilerApi
#     --capture-range-end=stop -o traces/LABEL.rank%q{RANK}' suite/benchmark_embedding_collection.sh ... --profile nsys
set -euo pipefail
cd "$(dirname "$0")/.."

USE_INDEX_DEDUP="${1:-True}"
USE_DYNAMIC_EMBEDDING="${2:-True}"
BATCH_SIZE="${3:-65536}"
shift $(( $# < 3 ? $# : 3 ))

# The GPU host requires NVLink multicast off (NCCL NVLS, symmetric memory, NVSHMEM).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# One OpenMP thread per rank unless asked otherwise: ranks share the host's cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

count_gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    [ -z "$CUDA_VISIBLE_DEVICES" ] && { echo 0; return; }
    awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}

if [ -z "${NPROC:-}" ]; then
  NPROC="$(count_gpus)"
  [ "$NPROC" -gt 0 ] || NPROC=2
fi
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"

echo "use_index_dedup=$USE_INDEX_DEDUP use_dynamic_embedding=$USE_DYNAMIC_EMBEDDING batch_size=$BATCH_SIZE processes=$NPROC" >&2
ENTRY=(-m suite.embedding_collection
  --use-index-dedup "$USE_INDEX_DEDUP" --use-dynamic-embedding "$USE_DYNAMIC_EMBEDDING"
  --batch-size "$BATCH_SIZE" "$@")
RUN=("$PYTHON" -m torch.distributed.run --standalone --nnodes 1 --nproc_per_node "$NPROC")
if [ -n "${RANK_WRAPPER:-}" ]; then
  read -r -a WRAPPER <<<"$RANK_WRAPPER"
  exec "${RUN[@]}" --no-python "${WRAPPER[@]}" "$PYTHON" "${ENTRY[@]}"
fi
exec "${RUN[@]}" "${ENTRY[@]}"
