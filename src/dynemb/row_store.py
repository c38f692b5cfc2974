"""Rows of values: embedding and optimizer state side by side, ``[rows, dim + state_width]``.

Row ``capacity`` (one past the last slot) is a spare row: gathers and scatters for
slot -1 (an id that found no slot) are redirected there, so the hot path needs no
mask and no host sync. Rows below ``device_rows`` live on the compute device, the
rest in host memory: all-device is the GPU mode, none-on-device the HOST mode,
anything between the HYBRID mode. A table's own host rows are not pinned: a gather
indexes them on the CPU into a fresh tensor first, so pinning tens of GB would buy
nothing. (Caching tables that share storage keep their host rows page-locked and
mapped instead, for kernels to read in place: ``dynemb.host_memory``.)
"""

from __future__ import annotations

import torch


class RowStore:
    """Fixed-size row storage split between device and host memory at ``device_rows``."""

    def __init__(self, capacity: int, width: int, device_rows: int, device: torch.device, shared: torch.Tensor | None = None) -> None:
        """``shared``: every row (the spare too) as a view of a larger ``[.., width]`` tensor that tables of one
        group share; on the device when all rows are (``device_rows`` past the last), in host memory when none is."""
        total = capacity + 1  # the spare row
        self.capacity = capacity
        self.width = width
        self.device = device
        self.device_rows = min(device_rows, total)
        host_rows = total - self.device_rows
        if shared is not None and (tuple(shared.shape) != (total, width) or 0 < host_rows < total):
            raise ValueError(f"shared rows of shape {tuple(shared.shape)} for {total} rows of {width}, {self.device_rows} on the device")
        on_device = shared is not None and host_rows == 0
        in_host = shared is not None and host_rows == total
        self.device_part = shared if on_device else torch.zeros(self.device_rows, width, dtype=torch.float32, device=device)
        self.host_part = shared if in_host else torch.zeros(host_rows, width, dtype=torch.float32)

    @property
    def device_only(self) -> bool:
        """Every row (the spare too) is in ``device_part``: fused kernels can update it in place."""
        return self.host_part.shape[0] == 0

    def _spare(self, slots: torch.Tensor) -> torch.Tensor:
        return torch.where(slots >= 0, slots, self.capacity)

    def gather(self, slots: torch.Tensor, columns: int | None = None) -> torch.Tensor:
        """Rows at ``slots`` (first ``columns`` columns only, if given) on the compute device."""
        slots = self._spare(slots)
        if self.host_part.shape[0] == 0:
            source = self.device_part if columns is None else self.device_part[:, :columns]
            return source[slots]
        if self.device_rows == 0:
            source = self.host_part if columns is None else self.host_part[:, :columns]
            return source[slots.cpu()].to(self.device, non_blocking=True)
        width = self.width if columns is None else columns
        out = torch.empty(slots.numel(), width, dtype=torch.float32, device=self.device)
        on_device = slots < self.device_rows
        local = torch.nonzero(on_device).squeeze(1)
        out[local] = self.device_part[slots[local], :width]
        remote = torch.nonzero(~on_device).squeeze(1)
        host_slots = (slots[remote] - self.device_rows).cpu()
        out[remote] = self.host_part[host_slots, :width].to(self.device, non_blocking=True)
        return out

    def scatter(self, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Write full rows at ``slots`` (slot -1 writes go to the spare row)."""
        slots = self._spare(slots)
        if self.host_part.shape[0] == 0:
            self.device_part[slots] = rows
            return
        if self.device_rows == 0:
            self.host_part[slots.cpu()] = rows.cpu()
            return
        on_device = slots < self.device_rows
        local = torch.nonzero(on_device).squeeze(1)
        self.device_part[slots[local]] = rows[local]
        remote = torch.nonzero(~on_device).squeeze(1)
        self.host_part[(slots[remote] - self.device_rows).cpu()] = rows[remote].cpu()
