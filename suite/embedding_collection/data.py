"""Each rank's batches: uniform ids per feature, a fixed number per sample, as the reference draws them.

Batches are drawn on the device before timing starts, all distinct (no batch
repeats, so the dynamic tables keep inserting new ids as a real run would).
One layout serves both backends: feature-major ids with ``num_features *
local_batch + 1`` offsets, which is TorchRec's KeyedJaggedTensor (values,
offsets) and the sharded dynamic collection's input. Fused ids (the dynamic
backend's one table) are the feature's ids plus the rows of the features before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import ECConfig


@dataclass(frozen=True)
class Batch:
    ids: torch.Tensor  # int64, feature-major
    offsets: torch.Tensor  # int64, num_features * local_batch + 1
    lengths: torch.Tensor  # int64, num_features * local_batch


def feature_bases(rows_per_feature: tuple[int, ...]) -> torch.Tensor:
    """First fused id of each feature (exclusive prefix sum of the rows)."""
    rows = torch.tensor(rows_per_feature, dtype=torch.int64)
    return torch.cumsum(rows, 0) - rows


def make_batches(
    cfg: ECConfig, rank: int, world_size: int, count: int, device: torch.device
) -> list[Batch]:
    """``count`` batches of this rank's share of the global batch, seeded by (seed, rank, index)."""
    local = cfg.local_batch_size(world_size)
    hot = torch.tensor(cfg.multi_hot_sizes, dtype=torch.int64, device=device)
    rows = torch.tensor(cfg.rows_per_feature, dtype=torch.int64, device=device)
    base = feature_bases(cfg.rows_per_feature).to(device)
    lengths = hot.repeat_interleave(local)
    offsets = torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0)])
    per_feature = hot * local
    total = int(per_feature.sum())
    feature_of_id = torch.repeat_interleave(
        torch.arange(cfg.num_features, device=device), per_feature, output_size=total
    )
    limit, shift = rows[feature_of_id], base[feature_of_id] if cfg.use_dynamic_embedding else None
    gen = torch.Generator(device=device)
    batches = []
    for i in range(count):
        gen.manual_seed(cfg.seed * 1_000_003 + rank * 10_007 + i)
        ids = torch.randint(0, 1 << 62, (total,), generator=gen, device=device) % limit
        if shift is not None:
            ids += shift
        batches.append(Batch(ids, offsets, lengths))
    return batches
