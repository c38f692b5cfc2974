"""Rows of values: embedding and optimizer state side by side, ``[rows, dim + state_width]``.

One store per tier of a group of tables. Rows below ``split`` live in device
memory, the rest in host memory: all on the device is the GPU mode (and a cache),
none the HOST mode (and a caching table's storage), anything between the HYBRID
mode. Row ``spare`` (the last) takes reads and writes for slot -1 (an id that found
no slot), so the hot path needs no mask and no host sync.

Host rows are read and written where they are: page-locked with
``cudaHostRegister`` and handed to the kernels as a device tensor over the same
memory (``dynemb.host_memory``), so a batch's rows move in one kernel over the bus
as TBE's UVM rows do. Where host memory cannot be mapped the store falls back to
copies: rows are gathered on the CPU into a pinned buffer and moved in one copy per
batch, and the update runs on a staged copy of the batch's rows, by the same
kernels. On a CPU device host memory is device memory and the torch path serves.
"""

from __future__ import annotations

import warnings

import torch

from dynemb import kernels
from dynemb.host_memory import device_view
from dynemb.kernels.operands import OptimizerArgs, RowParts


class RowStore:
    """``slots + 1`` rows of ``width`` floats, split at ``split`` between device and host memory."""

    def __init__(self, slots: int, width: int, device_rows: int, device: torch.device) -> None:
        """``device_rows``: rows in device memory (the spare too when it covers every slot)."""
        total = slots + 1
        self.width = width
        self.device = device
        self.spare = slots
        self.split = total if device_rows >= slots else device_rows
        self.device_part = torch.zeros(min(self.split, total), width, dtype=torch.float32, device=device)
        self.host_part = torch.zeros(total - self.device_part.shape[0], width, dtype=torch.float32)
        self._host_view = None
        if self.host_part.shape[0]:
            self._host_view = device_view(self.host_part, device)
            if self._host_view is None:
                warnings.warn(
                    f"dynemb: kernels on {device} cannot reach host memory (cudaHostRegister failed or no unified addressing); "
                    "host rows move through pinned copies instead (slower)",
                    RuntimeWarning, stacklevel=5,
                )

    @property
    def device_only(self) -> bool:
        """Every row (the spare too) is in device memory."""
        return self.split > self.spare

    @property
    def mapped(self) -> bool:
        """Kernels reach every row where it is (no copies)."""
        return self.device_only or self._host_view is not None

    def parts(self) -> RowParts:
        """Every row as the kernels address it (mapped stores only)."""
        if self.device_only:
            return RowParts(self.device_part, self.device_part, self.split, self.spare)
        host = self._host_view
        return RowParts(self.device_part if self.split else host, host, self.split, self.spare)

    def gather(self, slots: torch.Tensor, columns: int | None = None) -> torch.Tensor:
        """The first ``columns`` (default: all) of each slot's row, on the device; the spare row for -1."""
        columns = self.width if columns is None else columns
        if self.mapped:
            return kernels.gather_rows(self.parts(), slots, columns)
        out = torch.empty(slots.numel(), columns, dtype=torch.float32, device=self.device)
        local, remote, host_rows = self._split(slots)
        out[local] = kernels.gather_rows(self._device_parts(), slots[local], columns)
        out[remote] = self._to_device(self.host_part[host_rows, :columns])
        return out

    def gather_unique(self, sorted_slots: torch.Tensor, order: torch.Tensor, columns: int) -> torch.Tensor:
        """``gather(slots, columns)`` given the slots sorted (``sorted_slots[j]`` is index ``order[j]``'s): each
        distinct host row crosses the bus about once, however often the batch repeats its id."""
        if self.mapped:
            return kernels.gather_unique(self.parts(), sorted_slots, order, columns)
        unique, inverse = torch.unique_consecutive(sorted_slots, return_inverse=True)
        out = torch.empty(sorted_slots.numel(), columns, dtype=torch.float32, device=self.device)
        out[order] = self.gather(unique, columns)[inverse]
        return out

    def scatter(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Write full rows at each slot's row (slot -1: the spare row)."""
        if self.mapped:
            kernels.scatter_rows(self.parts(), slots, rows)
            return
        local, remote, host_rows = self._split(slots)
        kernels.scatter_rows(self._device_parts(), slots[local], rows[local])
        self.host_part[host_rows] = rows[remote].cpu()

    def reduce_and_update(self, sorted_slots: torch.Tensor, order: torch.Tensor, index_grads: torch.Tensor, optimizer: OptimizerArgs) -> None:
        """Sum each id's gradient rows (its slot's run in ``sorted_slots``) and step its row once, in place.

        Without mapped host rows the batch's rows are staged on the device, stepped by
        the same kernel, and written back.
        """
        if self.mapped:
            kernels.reduce_and_update(self.parts(), sorted_slots, order, index_grads, optimizer)
            return
        unique, inverse = torch.unique_consecutive(sorted_slots, return_inverse=True)
        stage = self.gather(unique)  # row i: the i-th distinct slot's (slot -1's too: the spare row)
        parts = RowParts(stage, stage, stage.shape[0] + 1, stage.shape[0] - 1)
        kernels.reduce_and_update(parts, inverse, order, index_grads, optimizer)
        self.scatter(unique, stage)

    def _device_parts(self) -> RowParts:
        """The device rows alone, for a store whose host rows kernels cannot reach."""
        return RowParts(self.device_part, self.device_part, self.split, self.split - 1)

    def _split(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Positions of slots whose rows are in device memory, of those in host memory, and those rows' host indices."""
        rows = torch.where(slots >= 0, slots, self.spare)
        on_device = rows < self.split
        remote = torch.nonzero(~on_device).squeeze(1)
        return torch.nonzero(on_device).squeeze(1), remote, (rows[remote] - self.split).cpu()

    def _to_device(self, rows: torch.Tensor) -> torch.Tensor:
        """Host rows on the device in one copy (from pinned memory, so the copy is a DMA)."""
        if self.device.type != "cuda":
            return rows.to(self.device)
        return rows.pin_memory().to(self.device, non_blocking=True)
