"""Checks of a TBE-layout batch that never make a training step wait for the GPU.

What needs no tensor values (types, dtypes, dims, device, number of offsets) is
checked at once. What does (offsets non-decreasing, from 0 to len(indices)) is one
verdict computed on the batch's device. Reading a CUDA tensor drains the step's
queue, so there the verdict is folded into the module's ``DeferredChecks`` and read
where a step cannot be slowed, and the batch goes on with offsets made safe: a bad
batch gives garbage, never an out-of-bounds access. On the CPU a read costs
nothing, so the verdict is read, and raised, at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

# Device types whose batches' value checks are read later (a read of a CUDA tensor waits for the GPU).
# Tests add "cpu" to take the deferred path without a GPU.
DEFERRED_DEVICE_TYPES = frozenset({"cuda"})

# A verdict's first entry: the check that failed, the one an eager check raises first being the higher.
_PASSED, _WRONG_ENDS, _DECREASING = 0, 1, 2


@dataclass(frozen=True)
class BatchLayout:
    """The per-table batch size and the offsets (int64) the kernels take: the batch's own, or, while its
    check is deferred, a safe copy of them."""

    batch_size: int
    offsets: torch.Tensor

    @cached_property
    def bounds(self) -> list[int]:
        """Where each table's indices start, and the last one's end (``num_tables + 1`` positions).

        A host read, so made only when asked: the one sync of a step's batch layout, which only a module of
        several storage groups pays (``Engine._part`` cuts the batch with it).
        """
        return self.offsets[:: self.batch_size].tolist()


class DeferredChecks:
    """The first failed value check among the batches a module took since it was last read, kept on the device.

    ``fold`` keeps a batch's verdict without a host read (two tiny kernels); ``raise_pending`` reads it (one
    host sync, only if some batch was folded since the last read, so an eval loop pays it once), clears it and
    raises the ValueError an eager check of that batch raises.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._first = torch.zeros(4, dtype=torch.int64, device=device)  # a verdict; all zeros: none failed
        self._unread = False
        self._unread_training = False

    @property
    def defers(self) -> bool:
        return self.device.type in DEFERRED_DEVICE_TYPES

    def fold(self, verdict: torch.Tensor, training: bool) -> None:
        self._first = torch.where(self._first[:1] != _PASSED, self._first, verdict)
        self._unread = True
        self._unread_training |= training

    def raise_pending(self, after_training: bool = False) -> None:
        """Raise the first pending failure; ``after_training``: only if a training batch came since the last
        read (an eval loop reads once, after training, and its own batches wait for the next read point)."""
        if not self._unread or (after_training and not self._unread_training):
            return
        self._unread = self._unread_training = False
        verdict = self._first.tolist()
        self._first.zero_()
        _raise_failed(*verdict)


def check_batch(indices: torch.Tensor, offsets: torch.Tensor, num_tables: int, checks: DeferredChecks, training: bool = True) -> BatchLayout:
    """Raise ValueError unless (indices, offsets) is a valid TBE batch for ``num_tables`` tables on
    ``checks.device``; the checks of the offsets' values wait in ``checks`` where it defers them."""
    if not isinstance(indices, torch.Tensor) or not isinstance(offsets, torch.Tensor):
        raise ValueError("indices and offsets must be tensors")
    if indices.dtype != torch.int64:
        raise ValueError(f"indices must be torch.int64, got {indices.dtype}")
    if offsets.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"offsets must be torch.int64 or torch.int32, got {offsets.dtype}")
    if indices.dim() != 1 or offsets.dim() != 1:
        raise ValueError(f"indices and offsets must be 1-D, got shapes {tuple(indices.shape)} and {tuple(offsets.shape)}")
    for name, tensor in (("indices", indices), ("offsets", offsets)):
        if tensor.device != checks.device:
            raise ValueError(f"{name} are on {tensor.device}, the tables on {checks.device}")
    entries = offsets.numel()
    if entries < num_tables + 1 or (entries - 1) % num_tables:
        raise ValueError(
            f"offsets must have num_tables * batch_size + 1 entries with batch_size >= 1 "
            f"({num_tables} tables), got {entries}"
        )
    batch_size = (entries - 1) // num_tables
    offsets = offsets.to(torch.int64)
    verdict = _verdict(offsets, indices.numel())
    if not checks.defers:
        _raise_failed(*verdict.tolist())
        return BatchLayout(batch_size, offsets)
    checks.fold(verdict, training)
    return BatchLayout(batch_size, _safe_offsets(offsets, indices.numel(), verdict))


def _verdict(offsets: torch.Tensor, num_indices: int) -> torch.Tensor:
    """``[failed check, first offset, last offset, len(indices)]`` of a batch, computed on its device."""
    first, last = offsets[0], offsets[-1]
    wrong_ends = torch.where((first != 0) | (last != num_indices), _WRONG_ENDS, _PASSED)
    check = torch.where((offsets[1:] < offsets[:-1]).any(), _DECREASING, wrong_ends)
    return torch.stack([check, first, last, torch.full_like(first, num_indices)])


def _raise_failed(check: int, first: int, last: int, num_indices: int) -> None:
    """The ValueError of a verdict's failed check, if one failed."""
    if check == _DECREASING:
        raise ValueError("offsets must be non-decreasing")
    if check == _WRONG_ENDS:
        raise ValueError(f"offsets must start at 0 and end at len(indices)={num_indices}, got {first} and {last}")


def _safe_offsets(offsets: torch.Tensor, num_indices: int, verdict: torch.Tensor) -> torch.Tensor:
    """The batch's offsets where it passed, else an even split of the indices into its bags (from 0 to
    len(indices), non-decreasing): a bad batch's output is garbage either way, and every kernel (pooling,
    unpooling by ``repeat_interleave`` with ``output_size``, the table search) stays in bounds. Elementwise,
    as a scan over a batch's offsets (``cummax``) is slow on CUDA."""
    bags = offsets.numel() - 1
    even = torch.arange(offsets.numel(), dtype=torch.int64, device=offsets.device) * num_indices // bags
    return torch.where(verdict[0] != _PASSED, even, offsets)
