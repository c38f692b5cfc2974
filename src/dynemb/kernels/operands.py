"""What the kernels take besides plain tensors: a row store's parts, a bucket map's tables.

``RowParts``, the tensors behind one row store as every row kernel sees them.

Rows ``[0, split)`` are in device memory (``device[r]``), rows ``[split, spare]``
in host memory (``host[r - split]``): one comparison per row decides the address,
as TBE's kernels pick a placement per table. With every row on the device,
``split`` is past the spare row and ``host`` is the device tensor (never read);
with none, ``split`` is 0 and ``device`` is the host tensor (never read), so no
kernel is ever handed an empty tensor. Both parts have the same row width. Row
``spare`` (the last) is where reads and writes for slot -1 go.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class RowParts(NamedTuple):
    device: torch.Tensor
    host: torch.Tensor
    split: int
    spare: int

    @property
    def width(self) -> int:
        return self.device.shape[1]

    @property
    def on_device(self) -> bool:
        """Every row (the spare too) is in device memory."""
        return self.split > self.spare


class BucketTensors(NamedTuple):
    """A ``dynemb.hash_table.BucketMap`` as the kernels read it: one int64 entry per table each."""

    num_buckets: torch.Tensor
    device_buckets: torch.Tensor
    device_base: torch.Tensor
    host_base: torch.Tensor


class PendingArrays(NamedTuple):
    """Scratch per slot of a hash table where one training lookup collects the ids it did not find.

    Row ``bucket`` (entries ``bucket * capacity + j``) holds that bucket's new ids of
    the batch in ascending order, the smallest ``capacity`` of them (``keys``; the
    int64 maximum where unused): entry ``j`` is the bucket's ``j``-th new id, the rank
    the insert places it by. ``owner`` is the batch position (plus one) that carries
    the id into the table (0: none yet), ``uses`` its count in the batch, ``target``
    the slot the insert gave it (-1: none). Every array has a spare last entry; all
    but ``target`` are reset after each insert.
    """

    keys: torch.Tensor  # int64
    owner: torch.Tensor  # int32
    uses: torch.Tensor  # int64
    target: torch.Tensor  # int64


class DrawTables(NamedTuple):
    """A group's UNIFORM or CONSTANT initializer as kernels draw it, one entry per table: a value is
    ``lower + span * u`` with ``u`` the uniform of (seed, id, column) (CONSTANT: ``span`` 0)."""

    seed_words: torch.Tensor  # int64
    lower: torch.Tensor  # float32
    span: torch.Tensor  # float32


# A batch check's outcome, the higher winning where a batch fails both (as the eager checks order them).
CHECK_PASSED, CHECK_WRONG_ENDS, CHECK_DECREASING = 0, 1, 2
# The record of a module's deferred batch checks (``dynemb.validation.DeferredChecks``), six int64:
# the sequence number of the first failed batch since the last read (int64 max: none), its failed check,
# first offset, last offset and len(indices); and the sequence number of the last failed batch.
RECORD_FIRST, RECORD_CHECK, RECORD_LOW, RECORD_HIGH, RECORD_INDICES, RECORD_LAST = range(6)
