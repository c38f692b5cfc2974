"""The row-wise sharded dynamic collection on 2 gloo processes equals one unsharded table set.

Every rank holds half of a global batch. The reference, built on each rank, is a
single-process ``BatchedDynamicEmbeddingTables`` fed the whole global batch with the
whole global gradient; each rank's sharded output must equal the reference rows of
its half, step after step of ADAM training, with index dedup on and off.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from dynemb.distributed import OwnerPolicy, ShardedDynamicEmbeddingCollection

WORLD = 2
DIM = 8
LOCAL_BATCH = 5
STEPS = 4
OPTIMIZER_ARGS = {"learning_rate": 0.05, "eps": 1e-3}


@dataclass(frozen=True)
class Scenario:
    name: str
    feature_tables: tuple[int, ...]
    num_tables: int
    policy: OwnerPolicy


SCENARIOS = (
    Scenario("one fused table, 3 features, hash owners", (0, 0, 0), 1, OwnerPolicy.HASH),
    Scenario("2 tables, features (0, 1, 0), modulo owners", (0, 1, 0), 2, OwnerPolicy.MODULO),
)


def global_batch(step: int, num_features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Feature-major ids of WORLD * LOCAL_BATCH samples, 0-4 ids each, many repeats, some huge or negative."""
    gen = torch.Generator().manual_seed(100 + step)
    lengths = torch.randint(0, 5, (num_features * WORLD * LOCAL_BATCH,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])
    ids = torch.randint(0, 40, (int(offsets[-1]),), generator=gen)
    rare = torch.rand(ids.shape, generator=gen) < 0.1
    ids[rare] = ids[rare] * (1 << 40) - (1 << 41)
    return ids, offsets


def local_positions(offsets: torch.Tensor, num_features: int, rank: int) -> torch.Tensor:
    """Positions, in the global feature-major id list, of rank ``rank``'s samples."""
    batch = WORLD * LOCAL_BATCH
    parts = []
    for f in range(num_features):
        first = f * batch + rank * LOCAL_BATCH
        parts.append(torch.arange(int(offsets[first]), int(offsets[first + LOCAL_BATCH])))
    return torch.cat(parts)


def local_batch(
    ids: torch.Tensor, offsets: torch.Tensor, num_features: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    positions = local_positions(offsets, num_features, rank)
    lengths = torch.diff(offsets).view(num_features, WORLD, LOCAL_BATCH)[:, rank].reshape(-1)
    return ids[positions], torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, 0)])


def table_major(
    offsets: torch.Tensor, feature_tables: tuple[int, ...], num_tables: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions of the global ids grouped by table, TBE offsets with one bag per table)."""
    batch = WORLD * LOCAL_BATCH
    per_table: list[list[torch.Tensor]] = [[] for _ in range(num_tables)]
    for f, t in enumerate(feature_tables):
        per_table[t].append(torch.arange(int(offsets[f * batch]), int(offsets[(f + 1) * batch])))
    groups = [torch.cat(p) if p else torch.zeros(0, dtype=torch.int64) for p in per_table]
    sizes = torch.tensor([g.numel() for g in groups])
    return torch.cat(groups), torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(sizes, 0)])


def run_scenario(rank: int, scenario: Scenario) -> None:
    options = [
        DynamicEmbTableOptions(dim=DIM, max_capacity=1024, bucket_capacity=16, seed=7 + t)
        for t in range(scenario.num_tables)
    ]
    reference = BatchedDynamicEmbeddingTables(
        options, optimizer=EmbOptimType.ADAM, pooling_mode=PoolingMode.NONE, **OPTIMIZER_ARGS
    )
    sharded = {
        dedup: ShardedDynamicEmbeddingCollection(
            options,
            scenario.feature_tables,
            EmbOptimType.ADAM,
            use_index_dedup=dedup,
            owner_policy=scenario.policy,
            **OPTIMIZER_ARGS,
        )
        for dedup in (True, False)
    }
    num_features = len(scenario.feature_tables)
    for step in range(STEPS):
        ids, offsets = global_batch(step, num_features)
        order, ref_offsets = table_major(offsets, scenario.feature_tables, scenario.num_tables)
        ref_rows = reference(ids[order], ref_offsets)
        grad = torch.randn((ids.numel(), DIM), generator=torch.Generator().manual_seed(step))
        expected = torch.empty_like(ref_rows)
        expected[order] = ref_rows.detach()
        ref_rows.backward(grad[order])
        mine = local_positions(offsets, num_features, rank)
        local_ids, local_offsets = local_batch(ids, offsets, num_features, rank)
        for dedup, module in sharded.items():
            rows = module(local_ids, local_offsets)
            torch.testing.assert_close(
                rows.detach(),
                expected[mine],
                atol=1e-5,
                rtol=1e-5,
                msg=lambda m, d=dedup, s=step: f"{scenario.name}, dedup={d}, step {s}: {m}",
            )
            rows.backward(grad[mine])
    sent = torch.tensor([sharded[True].ids_sent, sharded[False].ids_sent])
    dist.all_reduce(sent)
    assert int(sent[1]) == sum(global_batch(step, num_features)[0].numel() for step in range(STEPS))
    assert int(sent[0]) < int(sent[1]), (
        f"{scenario.name}: dedup sent {int(sent[0])} ids, no dedup {int(sent[1])}"
    )
    for dedup, module in sharded.items():
        stored = sum(module.local.size(t) for t in range(scenario.num_tables))
        total = torch.tensor([stored])
        dist.all_reduce(total)
        expected_size = sum(reference.size(t) for t in range(scenario.num_tables))
        assert int(total) == expected_size, (
            f"{scenario.name}, dedup={dedup}: shards hold {int(total)} ids, reference {expected_size}"
        )


def worker(rank: int, init_file: str) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=WORLD,
        timeout=timedelta(seconds=60),
    )
    try:
        torch.manual_seed(0)
        for scenario in SCENARIOS:
            run_scenario(rank, scenario)
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_sharded_collection_matches_single_process_tables(tmp_path: Path) -> None:
    # spawn, not fork: a child forked after the parent ran OpenMP work can hang in it
    mp.spawn(worker, args=(str(tmp_path / "init"),), nprocs=WORLD, join=True)


def test_needs_a_process_group() -> None:
    with pytest.raises(RuntimeError, match="process group"):
        ShardedDynamicEmbeddingCollection([DynamicEmbTableOptions(dim=DIM)], [0])
