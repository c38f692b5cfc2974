"""Multi-GPU EmbeddingCollection benchmark: row-wise sharded dynamic tables against TorchRec's (issue 9).

Run under torchrun (``suite/benchmark_embedding_collection.sh``); one process per
GPU with NCCL, or processes on the CPU with gloo.
"""
