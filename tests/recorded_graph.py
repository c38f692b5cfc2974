"""A CUDA graph's semantics on any device, for testing ``dynemb.graphs`` without a GPU.

``RecordedGraph.capture`` runs the work once and records every Triton launch (its grid and arguments as
they were) and every torch op that does device work (its arguments and outputs); ``replay`` runs them
again, in order, on the same tensors, writing each op's results into the tensors the capture returned,
as a CUDA graph replays its kernels on the memory it captured. A step that passed a launch an argument
that changes between steps (a clock, a batch number, a step) replays with the captured value, as on a
GPU, and trains differently; a value read on the host inside a capture (which a GPU capture refuses)
raises ``HostRead``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from dynemb.kernels import launches, triton_ops


class HostRead(AssertionError):
    """A captured step read a device value on the host."""


class RecordedGraph:
    """Records a step's device work in ``capture`` and runs it again in ``replay`` (see the module)."""

    def __init__(self, pool: object = None) -> None:  # noqa: ARG002 - a CUDA graph's signature
        self._work: list[tuple] = []

    def capture(self, work: Callable[[], Any]) -> Any:
        records = self._work
        launch = triton_ops._launch

        def recorded(kernel: object, grid: tuple, *args: object, **meta: object) -> None:
            records.append(("triton", launch, kernel, grid, args, meta))
            with _disable_current_modes():
                launch(kernel, grid, *args, **meta)

        triton_ops._launch = recorded
        try:
            with _Recorder(records):
                return work()
        finally:
            triton_ops._launch = launch

    def replay(self) -> None:
        for record in self._work:
            if record[0] == "triton":
                _, launch, kernel, grid, args, meta = record
                launch(kernel, grid, *args, **meta)
                continue
            _, func, args, kwargs, out = record
            result = func(*args, **kwargs)
            if not func._schema.is_mutable:
                for into, value in zip(_tensors(out), _tensors(result), strict=True):
                    into.copy_(value)


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


class _Recorder(TorchDispatchMode):
    def __init__(self, records: list[tuple]) -> None:
        super().__init__()
        self.records = records

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if launches._waits(name, args, kwargs):
            raise HostRead(f"{name} inside a captured step reads a device value on the host")
        out = func(*args, **kwargs)
        if not func.is_view and name not in launches._NO_WORK:
            self.records.append(("torch", func, args, kwargs, out))
        return out
