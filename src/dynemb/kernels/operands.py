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
