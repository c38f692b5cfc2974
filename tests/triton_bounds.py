"""A pytest plugin for runs under ``TRITON_INTERPRET=1``: every address a kernel loads, stores or
updates atomically must lie inside the storage of one of its launch's tensor arguments.

On a GPU an access past a tensor's end reads or overwrites whatever the caching allocator put next
to it, so the damage depends on the order of earlier allocations and shows up elsewhere; the
interpreter reads host memory and never complains. With this plugin (``-p triton_bounds``) the
first such access raises :class:`OutOfBounds`, naming the kernel, with the launch's programs run in
a shuffled order (``TRITON_PROGRAM_ORDER=launch`` keeps Triton's), so that a kernel that relies on
one program finishing before another is caught too.
"""

from __future__ import annotations

import os
import random
import types
from typing import Any

import numpy as np
from triton.runtime import interpreter

_storages: list[tuple[int, int]] = []  # (first byte, end) of the running launch's tensor arguments
_kernel: list[str] = [""]
_shuffle = random.Random(0)


class OutOfBounds(AssertionError):
    """A kernel addressed memory outside every tensor it was given."""


def _collect(arg: Any, out: list[tuple[int, int]]) -> None:
    if isinstance(arg, tuple):
        for item in arg:
            _collect(item, out)
    elif hasattr(arg, "untyped_storage"):
        storage = arg.untyped_storage()
        out.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))


def _shuffled_range(*bounds: int) -> list[int]:
    order = list(range(*bounds))
    _shuffle.shuffle(order)
    return order


def _program_loop(call: types.FunctionType) -> types.FunctionType:
    """``GridExecutor.__call__`` with its loops over the grid in shuffled order."""
    if "range" not in call.__code__.co_names:
        raise RuntimeError("triton_bounds: Triton's GridExecutor.__call__ no longer loops with range(); update the plugin")
    scope = dict(call.__globals__, range=_shuffled_range)
    return types.FunctionType(call.__code__, scope, call.__name__, call.__defaults__, call.__closure__)


def _checked_launch(call: Any) -> Any:
    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        storages: list[tuple[int, int]] = []
        for arg in (*args, *kwargs.values()):
            _collect(arg, storages)
        _storages[:] = sorted(storages)
        _kernel[0] = self.fn.__name__
        try:
            return call(self, *args, **kwargs)
        finally:
            _storages.clear()

    return launch


def _check(what: str, pointers: Any, mask: Any | None) -> None:
    """Raise unless every active lane's element lies inside one argument's storage."""
    size = np.dtype(interpreter._get_np_dtype(pointers.get_element_ty())).itemsize
    addresses = np.asarray(pointers.data, dtype=np.uint64).ravel()
    if mask is not None:
        addresses = addresses[np.broadcast_to(np.asarray(mask.data, dtype=bool), pointers.data.shape).ravel()]
    if addresses.size == 0:
        return
    starts = np.array([s for s, _ in _storages], dtype=np.uint64)
    ends = np.array([e for _, e in _storages], dtype=np.uint64)
    owner = np.searchsorted(starts, addresses, side="right").astype(np.int64) - 1
    inside = (owner >= 0) & (addresses + np.uint64(size) <= ends[np.clip(owner, 0, None)]) if starts.size else np.zeros(addresses.shape, bool)
    if not inside.all():
        outside = addresses[~inside]
        raise OutOfBounds(
            f"{_kernel[0]}: {what} of {outside.size} lanes outside every tensor argument (first at {hex(int(outside[0]))}; "
            f"arguments at {[(hex(s), e - s) for s, e in _storages]})"
        )


def _install() -> None:
    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        _check("load", ptrs, mask)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        _check("store", ptrs, mask)
        return store(self, ptrs, value, mask, cache_policy)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        _check("atomic", ptr, mask)
        return rmw(self, op, ptr, val, mask, sem, scope)

    def create_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, sem: Any, scope: Any) -> Any:
        _check("compare-and-swap", ptr, None)  # Triton's takes no mask: every lane swaps somewhere
        return cas(self, ptr, cmp, val, sem, scope)

    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = create_atomic_rmw, create_atomic_cas
    call = interpreter.GridExecutor.__call__
    if os.environ.get("TRITON_PROGRAM_ORDER") != "launch":
        call = _program_loop(call)
    interpreter.GridExecutor.__call__ = _checked_launch(call)


if os.environ.get("TRITON_INTERPRET") == "1":
    _install()
