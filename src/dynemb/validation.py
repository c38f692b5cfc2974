"""Checks of a TBE-layout batch, with one host transfer for all of them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BatchLayout:
    """Where each table's indices start and end, and the per-table batch size."""

    batch_size: int
    bounds: list[int]  # num_tables + 1 positions in indices
    offsets: torch.Tensor  # int64


def check_batch(indices: torch.Tensor, offsets: torch.Tensor, num_tables: int, device: torch.device) -> BatchLayout:
    """Raise ValueError unless (indices, offsets) is a valid TBE batch for ``num_tables`` tables."""
    if not isinstance(indices, torch.Tensor) or not isinstance(offsets, torch.Tensor):
        raise ValueError("indices and offsets must be tensors")
    if indices.dtype != torch.int64:
        raise ValueError(f"indices must be torch.int64, got {indices.dtype}")
    if offsets.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"offsets must be torch.int64 or torch.int32, got {offsets.dtype}")
    if indices.dim() != 1 or offsets.dim() != 1:
        raise ValueError(f"indices and offsets must be 1-D, got shapes {tuple(indices.shape)} and {tuple(offsets.shape)}")
    for name, tensor in (("indices", indices), ("offsets", offsets)):
        if tensor.device != device:
            raise ValueError(f"{name} are on {tensor.device}, the tables on {device}")
    entries = offsets.numel()
    if entries < num_tables + 1 or (entries - 1) % num_tables:
        raise ValueError(
            f"offsets must have num_tables * batch_size + 1 entries with batch_size >= 1 "
            f"({num_tables} tables), got {entries}"
        )
    batch_size = (entries - 1) // num_tables
    offsets = offsets.to(torch.int64)
    decreasing = (offsets[1:] < offsets[:-1]).any().to(torch.int64).view(1)
    summary = torch.cat([offsets[::batch_size], decreasing]).tolist()
    bounds, is_decreasing = summary[:-1], summary[-1]
    if is_decreasing:
        raise ValueError("offsets must be non-decreasing")
    if bounds[0] != 0 or bounds[-1] != indices.numel():
        raise ValueError(f"offsets must start at 0 and end at len(indices)={indices.numel()}, got {bounds[0]} and {bounds[-1]}")
    return BatchLayout(batch_size, bounds, offsets)
