"""Does the sharded dynamic collection equal one unsharded table set, on this machine's backend?

    torchrun --standalone --nproc_per_node 2 -m suite.embedding_collection.check

Every rank holds its share of a small global batch. The reference, built on each
rank, is one ``BatchedDynamicEmbeddingTables`` fed the whole global batch and the
whole global gradient; each rank's sharded output must equal the reference rows
of its share, step after step of ADAM training, with index dedup on and off, for
a fused table (hash owners) and two tables (modulo owners). The CPU test runs
it on gloo; on GPUs it checks the NCCL path before a benchmark is trusted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from dynemb import BatchedDynamicEmbeddingTables, DynamicEmbTableOptions, EmbOptimType, PoolingMode
from dynemb.distributed import OwnerPolicy, ShardedDynamicEmbeddingCollection

DIM = 8
LOCAL_BATCH = 5
STEPS = 4
OPTIMIZER_ARGS = {"learning_rate": 0.05, "eps": 1e-3}
TOLERANCE = 1e-5


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


def _with_zero(lengths: torch.Tensor) -> torch.Tensor:
    return torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0)])


def global_batch(step: int, num_features: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Feature-major ids of ``world * LOCAL_BATCH`` samples: 0-4 ids each, many repeats, some huge or negative."""
    gen = torch.Generator().manual_seed(100 + step)
    offsets = _with_zero(torch.randint(0, 5, (num_features * world * LOCAL_BATCH,), generator=gen))
    ids = torch.randint(0, 40, (int(offsets[-1]),), generator=gen)
    rare = torch.rand(ids.shape, generator=gen) < 0.1
    ids[rare] = ids[rare] * (1 << 40) - (1 << 41)
    return ids, offsets


def local_positions(
    offsets: torch.Tensor, num_features: int, rank: int, world: int
) -> torch.Tensor:
    """Positions, in the global feature-major id list, of the samples of rank ``rank``."""
    batch = world * LOCAL_BATCH
    starts = offsets[torch.arange(num_features) * batch + rank * LOCAL_BATCH]
    stops = offsets[torch.arange(num_features) * batch + (rank + 1) * LOCAL_BATCH]
    return torch.cat([torch.arange(int(a), int(b)) for a, b in zip(starts, stops, strict=True)])


def local_batch(
    ids: torch.Tensor, offsets: torch.Tensor, num_features: int, rank: int, world: int
) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.diff(offsets).view(num_features, world, LOCAL_BATCH)[:, rank].reshape(-1)
    return ids[local_positions(offsets, num_features, rank, world)], _with_zero(lengths)


def table_major(
    offsets: torch.Tensor, feature_tables: tuple[int, ...], num_tables: int, world: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions of the global ids grouped by table, TBE offsets with one bag per table)."""
    batch = world * LOCAL_BATCH
    groups = []
    for t in range(num_tables):
        spans = [
            torch.arange(int(offsets[f * batch]), int(offsets[(f + 1) * batch]))
            for f, ft in enumerate(feature_tables)
            if ft == t
        ]
        groups.append(torch.cat(spans) if spans else torch.zeros(0, dtype=torch.int64))
    return torch.cat(groups), _with_zero(torch.tensor([g.numel() for g in groups]))


def check_scenario(scenario: Scenario, rank: int, world: int, device: torch.device) -> None:
    """Raise AssertionError at the first output (or table size) that differs from the reference."""
    options = [
        DynamicEmbTableOptions(dim=DIM, max_capacity=1024, bucket_capacity=16, seed=7 + t)
        for t in range(scenario.num_tables)
    ]
    reference = BatchedDynamicEmbeddingTables(
        options,
        optimizer=EmbOptimType.ADAM,
        pooling_mode=PoolingMode.NONE,
        device=device,
        **OPTIMIZER_ARGS,
    )
    sharded = {
        dedup: ShardedDynamicEmbeddingCollection(
            options, scenario.feature_tables, EmbOptimType.ADAM, device=device,
            use_index_dedup=dedup, owner_policy=scenario.policy, **OPTIMIZER_ARGS,
        )
        for dedup in (True, False)
    }  # fmt: skip
    num_features = len(scenario.feature_tables)
    total_ids = 0
    for step in range(STEPS):
        ids, offsets = global_batch(step, num_features, world)
        total_ids += ids.numel()
        order, ref_offsets = table_major(
            offsets, scenario.feature_tables, scenario.num_tables, world
        )
        ref_rows = reference(ids[order].to(device), ref_offsets.to(device))
        grad = torch.randn((ids.numel(), DIM), generator=torch.Generator().manual_seed(step)).to(
            device
        )
        expected = torch.empty_like(ref_rows)
        expected[order.to(device)] = ref_rows.detach()
        ref_rows.backward(grad[order.to(device)])
        mine = local_positions(offsets, num_features, rank, world).to(device)
        local_ids, local_offsets = (
            t.to(device) for t in local_batch(ids, offsets, num_features, rank, world)
        )
        for dedup, module in sharded.items():
            rows = module(local_ids, local_offsets)
            torch.testing.assert_close(
                rows.detach(), expected[mine], atol=TOLERANCE, rtol=TOLERANCE,
                msg=lambda m, d=dedup, s=step: f"{scenario.name}, dedup={d}, step {s}, rank {rank}: {m}",
            )  # fmt: skip
            rows.backward(grad[mine])
    sent = torch.tensor([sharded[True].ids_sent, sharded[False].ids_sent], device=device)
    dist.all_reduce(sent)
    assert int(sent[1]) == total_ids, (
        f"{scenario.name}: without dedup {int(sent[1])} ids were sent, {total_ids} expected"
    )
    assert int(sent[0]) < int(sent[1]), (
        f"{scenario.name}: dedup sent {int(sent[0])} ids, no dedup {int(sent[1])}"
    )
    expected_size = sum(reference.size(t) for t in range(scenario.num_tables))
    for dedup, module in sharded.items():
        stored = torch.tensor(
            [sum(module.local.size(t) for t in range(scenario.num_tables))], device=device
        )
        dist.all_reduce(stored)
        assert int(stored) == expected_size, (
            f"{scenario.name}, dedup={dedup}: shards hold {int(stored)} ids, reference {expected_size}"
        )


def check_all(rank: int, world: int, device: torch.device) -> None:
    for scenario in SCENARIOS:
        check_scenario(scenario, rank, world, device)


def main() -> int:
    from ..errors import ECConfigError
    from .run import rank_from_env

    try:
        where = rank_from_env()
    except ECConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dist.init_process_group(
        where.comm_backend, **({"device_id": where.device} if where.device.type == "cuda" else {})
    )
    try:
        check_all(where.rank, where.world_size, where.device)
    except AssertionError as exc:
        print(
            f"rank {where.rank}: MISMATCH: {' '.join(str(exc).split())}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    finally:
        dist.destroy_process_group()
    print(
        f"rank {where.rank}/{where.world_size} on {where.device}: sharded outputs equal the unsharded tables",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
