"""The row-wise sharded dynamic collection on 2 gloo processes equals one unsharded table set.

The check itself (``suite.embedding_collection.check``, also runnable under
torchrun on GPUs) compares every rank's sharded output with the rows a
single-process ``BatchedDynamicEmbeddingTables`` gives for the whole global
batch, through 4 ADAM steps, dedup on and off, fused and multi-table. Here it
runs on 2 CPU processes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dynemb import DynamicEmbTableOptions
from dynemb.distributed import ShardedDynamicEmbeddingCollection
from suite.embedding_collection.check import check_all

WORLD = 2


def worker(rank: int, init_file: str) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=60),
    )
    try:
        check_all(rank, WORLD, torch.device("cpu"))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_sharded_collection_matches_single_process_tables(tmp_path: Path) -> None:
    # spawn, not fork: a child forked after the parent ran OpenMP work can hang in it
    mp.spawn(worker, args=(str(tmp_path / "init"),), nprocs=WORLD, join=True)


def test_needs_a_process_group() -> None:
    with pytest.raises(RuntimeError, match="process group"):
        ShardedDynamicEmbeddingCollection([DynamicEmbTableOptions(dim=8)], [0])
