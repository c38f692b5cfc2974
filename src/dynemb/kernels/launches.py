"""What a step launches on the device, and whether it would make the host wait: counted on any device.

``counting()`` counts, while it is active, the Triton kernels the dispatcher launches (by kernel) and the torch
ops that launch device work (by op: views and allocations launch nothing; on a GPU one op may be several
kernels, a sort about a dozen), and records each op that makes the host wait for the device on CUDA: a value
read (``item``, ``bool``, ``tolist``), ``nonzero``, ``unique``, indexing by a mask, ``repeat_interleave``
without its output size. On CPU tensors sent down the CUDA path (``tests/cuda_path.py``,
``benchmarks/bench_launch_host.py``) it shows what a GPU step would launch and whether it would synchronise,
without a GPU; ``torch.cuda.set_sync_debug_mode`` is the GPU's own check (``tests/test_dynemb_no_sync.py``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

# Ops that launch no device work (allocations, metadata, autograd bookkeeping); views are told by their schema.
_NO_WORK = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh", "detach", "alias", "resize_",
    "_unsafe_view", "_reshape_alias",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "set_",
})
# Ops that read device values on the host (a device-to-host copy the host waits for) on CUDA.
_SYNCING = frozenset({
    "_local_scalar_dense", "is_nonzero", "nonzero", "masked_select", "unique_consecutive", "_unique", "_unique2", "unique_dim",
    "equal", "allclose",
})


@dataclass
class Launches:
    """Launches and host waits seen while ``counting`` was active."""

    triton: Counter[str] = field(default_factory=Counter)  # Triton kernels, by name
    torch: Counter[str] = field(default_factory=Counter)  # torch ops that launch device work, by op
    syncs: list[str] = field(default_factory=list)  # ops that make the host wait on CUDA, in order

    @property
    def total(self) -> int:
        return sum(self.triton.values()) + sum(self.torch.values())


def _waits(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether op ``name`` with these arguments makes the host wait for the device on CUDA."""
    if name in _SYNCING:
        return True
    if name == "repeat_interleave":  # the output's size is a sum of device values unless given
        return kwargs.get("output_size") is None
    if name in ("index", "index_put", "index_put_"):  # a boolean mask index is compacted first (a nonzero)
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    return False


class _Recorder(TorchDispatchMode):
    def __init__(self, launches: Launches) -> None:
        super().__init__()
        self.launches = launches

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if _waits(name, args, kwargs):
            self.launches.syncs.append(name)
        elif not func.is_view and name not in _NO_WORK:
            self.launches.torch[name] += 1
        return func(*args, **kwargs)


@contextlib.contextmanager
def counting() -> Iterator[Launches]:
    """Count what runs inside the block (see the module's docstring); a launch's own work (a Triton kernel run by
    the interpreter, say) is not counted."""
    from dynemb.kernels import (
        triton_ops,  # only where Triton imports: the Triton launches are what is counted
    )

    launches = Launches()
    launch, tolist, numpy = triton_ops._launch, torch.Tensor.tolist, torch.Tensor.numpy

    def counted_launch(kernel: object, grid: tuple, *args: object, **meta: object) -> None:
        launches.triton[getattr(kernel, "__name__", None) or kernel.fn.__name__] += 1
        with _disable_current_modes():
            launch(kernel, grid, *args, **meta)

    def read(original):  # noqa: ANN001, ANN202 - wraps a Tensor method
        def reading(tensor: torch.Tensor, *args: object, **kwargs: object) -> object:
            launches.syncs.append(original.__name__)
            return original(tensor, *args, **kwargs)

        return reading

    triton_ops._launch = counted_launch
    torch.Tensor.tolist, torch.Tensor.numpy = read(tolist), read(numpy)
    try:
        with _Recorder(launches):
            yield launches
    finally:
        triton_ops._launch = launch
        torch.Tensor.tolist, torch.Tensor.numpy = tolist, numpy
