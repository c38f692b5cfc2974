"""Checks of a TBE-layout batch that never make a training step wait for the GPU.

What needs no tensor values (types, dtypes, dims, device, number of offsets) is
checked at once. What does (offsets non-decreasing, from 0 to len(indices)) is
checked on the batch's device into a record (``kernels.check_offsets``). Reading a
CUDA tensor drains the step's queue, so there the record is the module's
``DeferredChecks``, read where a step cannot be slowed, and the batch goes on with
offsets made safe: a bad batch gives garbage, never an out-of-bounds access. On the
CPU a read costs nothing, so a batch's own record is read, and raised, at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import torch

from dynemb import kernels
from dynemb.kernels.operands import (
    CHECK_DECREASING,
    CHECK_WRONG_ENDS,
    RECORD_CHECK,
    RECORD_FIRST,
    RECORD_HIGH,
    RECORD_INDICES,
    RECORD_LAST,
    RECORD_LOW,
)

if TYPE_CHECKING:
    from dynemb.counters import StepCounters

# Device types whose batches' value checks are read later (a read of a CUDA tensor waits for the GPU).
# Tests add "cpu" to take the deferred path without a GPU.
DEFERRED_DEVICE_TYPES = frozenset({"cuda"})


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

    ``fold`` checks a batch into the record without a host read (``kernels.check_offsets``: one or two small
    kernels on CUDA), numbering batches so the first failure stays; ``raise_pending`` reads it (one host sync, only if
    some batch was folded since the last read, so an eval loop pays it once), clears it and raises the
    ValueError an eager check of that batch raises.
    """

    def __init__(self, device: torch.device, counters: StepCounters) -> None:
        self.device = device
        self.counters = counters  # the batch number: ``StepCounters.seq``
        self._record = _fresh_record(device)
        self._unread = False
        self._unread_training = False

    @property
    def defers(self) -> bool:
        return self.device.type in DEFERRED_DEVICE_TYPES

    def fold(self, offsets: torch.Tensor, num_indices: int, training: bool, safe: bool) -> torch.Tensor:
        """Check a batch (numbered already: ``StepCounters.tick``) into the record; the offsets its kernels may take
        (its own, or with ``safe`` safe ones where it failed)."""
        self.folded(training)
        return kernels.check_offsets(offsets, num_indices, self._record, self.counters.seq, safe)

    def folded(self, training: bool) -> None:
        """Note that a batch was folded (a CUDA graph's replay of a fold: its kernels ran, this did not)."""
        self._unread = True
        self._unread_training |= training

    def raise_pending(self, after_training: bool = False) -> None:
        """Raise the first pending failure; ``after_training``: only if a training batch came since the last
        read (an eval loop reads once, after training, and its own batches wait for the next read point)."""
        if not self._unread or (after_training and not self._unread_training):
            return
        self._unread = self._unread_training = False
        record = self._record.tolist()
        _clear(self._record)
        _raise_failed(record)


def _clear(record: torch.Tensor) -> None:
    """A record of no failure (fills of one-entry views, on the device: an item assignment copies its value from
    host memory on CUDA, which waits)."""
    record.zero_()
    record[RECORD_FIRST : RECORD_FIRST + 1].fill_(torch.iinfo(torch.int64).max)
    record[RECORD_LAST : RECORD_LAST + 1].fill_(-1)


def _fresh_record(device: torch.device) -> torch.Tensor:
    record = torch.empty(RECORD_LAST + 1, dtype=torch.int64, device=device)
    _clear(record)
    return record


def _raise_failed(record: list[int]) -> None:
    """The ValueError of a record's first failed batch, if one failed."""
    check = record[RECORD_CHECK]
    if check == CHECK_DECREASING:
        raise ValueError("offsets must be non-decreasing")
    if check == CHECK_WRONG_ENDS:
        raise ValueError(
            f"offsets must start at 0 and end at len(indices)={record[RECORD_INDICES]}, got {record[RECORD_LOW]} and {record[RECORD_HIGH]}"
        )


def check_batch(
    indices: torch.Tensor, offsets: torch.Tensor, num_tables: int, checks: DeferredChecks, training: bool = True,
    lookups: Iterable[int] = (), safe: bool = True,
) -> BatchLayout:
    """Raise ValueError unless (indices, offsets) is a valid TBE batch for ``num_tables`` tables on
    ``checks.device``; the checks of the offsets' values wait in ``checks`` where it defers them. The batch is
    counted (``StepCounters.tick``: its number, and the clocks of the groups ``lookups`` that look it up).
    ``safe``: the offsets the kernels take must be safe even where the batch's are bad (see
    ``kernels.check_offsets``)."""
    batch_size = batch_size_of(indices, offsets, num_tables, checks.device)
    offsets = offsets.to(torch.int64)
    checks.counters.tick(batch=True, clocks=lookups)
    if checks.defers:
        return BatchLayout(batch_size, checks.fold(offsets, indices.numel(), training, safe))
    record = _fresh_record(offsets.device)
    kernels.check_offsets(offsets, indices.numel(), record, checks.counters.seq, False)
    _raise_failed(record.tolist())
    return BatchLayout(batch_size, offsets)


def batch_size_of(indices: torch.Tensor, offsets: torch.Tensor, num_tables: int, device: torch.device) -> int:
    """The checks of a batch that need no tensor values (types, dtypes, dims, device, number of offsets): a
    ValueError saying what is wrong, else the per-table batch size."""
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
    return (entries - 1) // num_tables
