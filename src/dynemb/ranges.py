"""One helper that names a region for every profiler at once.

The breakdown attributes kernels by the ranges that enclose their launch
(DESIGN.md, "Range layout"). nsys and ncu see NVTX ranges; the PyTorch profiler
sees ``record_function`` ranges. Emitting both from one place keeps the tree
identical whichever profiler ran. With no profiler attached the cost is a
flag check (and an NVTX push/pop, which is a no-op without an injected tool).
"""

from __future__ import annotations

import torch
from torch.autograd import profiler as _autograd_profiler


def _nvtx_available() -> bool:
    if torch.version.cuda is None:
        return False
    try:
        torch.cuda.nvtx.range_push("probe")
        torch.cuda.nvtx.range_pop()
    except (RuntimeError, AttributeError):
        return False
    return True


_NVTX = _nvtx_available()
_range_push = torch.cuda.nvtx.range_push
_range_pop = torch.cuda.nvtx.range_pop
_record_enter = torch.ops.profiler._record_function_enter_new
_record_exit = torch.ops.profiler._record_function_exit._RecordFunction


class emit_range:  # noqa: N801 - used like a function: `with emit_range("op:x"):`
    """Context manager: an NVTX push/pop range (default domain) and a torch.profiler range."""

    __slots__ = ("name", "_handle")

    def __init__(self, name: str) -> None:
        self.name = name
        self._handle = None

    def __enter__(self) -> emit_range:
        if _NVTX:
            _range_push(self.name)
        if _autograd_profiler._is_profiler_enabled:
            self._handle = _record_enter(self.name, None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            _record_exit(self._handle)
            self._handle = None
        if _NVTX:
            _range_pop()


def op_range(name: str) -> emit_range:
    """A range for one op, named ``op:<name>`` as the breakdown expects."""
    return emit_range(f"op:{name}")
