"""Where each hot step runs: fused Triton kernels on CUDA, plain torch elsewhere.

Every step is written twice, with one signature: in ``dynemb.kernels.torch_ops`` (the CPU path and the
reference, whose docstrings say what each step does) and in ``dynemb.kernels.triton_ops`` (the kernels,
imported lazily so a CPU-only install never needs Triton). Their operands are the bundles of
``dynemb.kernels.operands``. This module is the one dispatch: each step below is the torch function wrapped
so that it runs the Triton function of the same name instead when its first argument (a tensor, or a bundle
whose first field is one) is a CUDA tensor and Triton imports; ``DYNEMB_KERNELS=torch`` forces the torch path
everywhere (the "before" of a speed comparison, or a way to rule the kernels out). The two give the same
result up to float summation order. Steps take their arguments by position (the dispatcher makes a batch's
strided 1-D tensors dense for the kernels).

A Triton step that fails (say, a Triton version without some feature cannot compile it) raises before it
launches and before anything is written, so the step reruns in torch; it is reported once (a
``RuntimeWarning``) and not tried again in this process. A step that fails after a write raises
``PartialUpdateError`` and is never rerun.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

import torch

from dynemb.errors import PartialUpdateError
from dynemb.kernels import torch_ops

_ENV = "DYNEMB_KERNELS"


@functools.cache
def triton_importable() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except ImportError:
        return False
    return True


def _triton_for(is_cuda: bool) -> bool:
    return is_cuda and os.environ.get(_ENV, "triton") != "torch" and triton_importable()


def use_triton(tensor: torch.Tensor) -> bool:
    """True when ``tensor``'s step should run the fused Triton kernel."""
    return _triton_for(tensor.is_cuda)


def kernel_path(device: torch.device | str) -> str:
    """Which kernels the hot steps run on ``device`` in this process, as a run's records name it.

    ``triton`` (the fused kernels), ``torch`` (the fallback: not CUDA, Triton missing, or
    ``DYNEMB_KERNELS=torch``), or ``triton+torch`` once some Triton kernel failed to
    compile and its step ran in torch (a step warns when that happens).
    """
    if not _triton_for(torch.device(device).type == "cuda"):
        return "torch"
    return "triton+torch" if _FAILED else "triton"


_FAILED: set[str] = set()
_TRITON: dict[str, ModuleType] = {}  # "ops": dynemb.kernels.triton_ops, once imported


def _import_triton() -> ModuleType:
    from dynemb.kernels import triton_ops

    _TRITON["ops"] = triton_ops
    return triton_ops


def _dense(args: tuple) -> tuple:
    """The kernels index 1-D tensors densely: a batch's strided ones are copied (tables' own arrays are dense
    already, so nothing written in place is ever a copy)."""
    return tuple(a.contiguous() if isinstance(a, torch.Tensor) and a.dim() == 1 and not a.is_contiguous() else a for a in args)


Step = TypeVar("Step", bound=Callable)


def _dispatched(reference: Step) -> Step:
    """``reference`` (a torch step), run as the Triton step of the same name where ``use_triton`` says so."""
    name = reference.__name__

    @functools.wraps(reference)
    def step(*args: object) -> object:
        first = args[0]
        if use_triton(first if isinstance(first, torch.Tensor) else first[0]) and name not in _FAILED:
            ops = _TRITON.get("ops") or _import_triton()
            try:
                return getattr(ops, name)(*_dense(args))
            except PartialUpdateError:
                raise
            except Exception as error:  # noqa: BLE001 - any compile failure falls back, loudly
                _FAILED.add(name)
                warnings.warn(f"dynemb: Triton kernel for {name} failed ({type(error).__name__}: {error}); using torch for it", RuntimeWarning, stacklevel=2)
        return reference(*args)

    return step  # type: ignore[return-value]


check_offsets = _dispatched(torch_ops.check_offsets)
find = _dispatched(torch_ops.find)
find_or_claim = _dispatched(torch_ops.find_or_claim)
fresh_rows = _dispatched(torch_ops.fresh_rows)
gather_rows = _dispatched(torch_ops.gather_rows)
gather_unique = _dispatched(torch_ops.gather_unique)
outgoing = _dispatched(torch_ops.outgoing)
place_keys = _dispatched(torch_ops.place_keys)
place_new = _dispatched(torch_ops.place_new)
pool_rows = _dispatched(torch_ops.pool_rows)
reduce_and_update = _dispatched(torch_ops.reduce_and_update)
scatter_rows = _dispatched(torch_ops.scatter_rows)
uniform_rows = _dispatched(torch_ops.uniform_rows)
write_new = _dispatched(torch_ops.write_new)

# The dispatched steps: ``torch_ops`` and ``triton_ops`` each define every one, with the same signature.
STEPS = (
    "check_offsets", "find", "find_or_claim", "fresh_rows", "gather_rows", "gather_unique", "outgoing", "place_keys", "place_new",
    "pool_rows", "reduce_and_update", "scatter_rows", "uniform_rows", "write_new",
)
