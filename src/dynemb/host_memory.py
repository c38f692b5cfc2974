"""Host memory that device kernels read and write in place, as TBE's UVM-backed tables do.

Caching tables move the rows of every cache miss and eviction between host and
device each step. Gathering them on the CPU first (index, then copy) makes the
host the bottleneck; instead the host rows are page-locked with
``cudaHostRegister`` and, under unified addressing, handed to kernels as a CUDA
tensor over the same memory, so a gather or scatter of rows is one kernel over the
bus. On a CPU device host memory is device memory and nothing is needed.
"""

from __future__ import annotations

import weakref

import torch


class _HostArray:
    """A CPU tensor seen through ``__cuda_array_interface__``; holds the tensor while any view of it lives."""

    def __init__(self, host: torch.Tensor) -> None:
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": tuple(host.shape),
            "typestr": "<f4",
            "data": (host.data_ptr(), False),
            "version": 3,
            "strides": tuple(stride * host.element_size() for stride in host.stride()),
        }


def _unregister(pointer: int) -> None:
    torch.cuda.cudart().cudaHostUnregister(pointer)


def device_view(host: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """A tensor on ``device`` over the memory of the float32 CPU tensor ``host``, or None where there can be none.

    On CUDA the memory is page-locked for as long as the view (or any view of it)
    lives; a one-element round trip checks that kernels reach it (a device without
    unified addressing or host-pointer access answers None).
    """
    if device.type == "cpu":
        return host
    if device.type != "cuda" or host.dtype != torch.float32 or not host.is_contiguous() or host.numel() == 0:
        return None
    pointer, size = host.data_ptr(), host.numel() * host.element_size()
    cudart = torch.cuda.cudart()
    if cudart.cudaHostRegister(pointer, size, 0) != cudart.cudaError.success:
        return None
    array = _HostArray(host)
    weakref.finalize(array, _unregister, pointer)
    try:
        with torch.cuda.device(device):
            view = torch.as_tensor(array, device=device)
            probe = host.view(-1)[0].item()
            view.view(-1)[0] = probe + 1.0
            torch.cuda.synchronize(device)
            reached = host.view(-1)[0].item() == probe + 1.0
            host.view(-1)[0] = probe
    except (RuntimeError, TypeError, ValueError):
        return None
    return view if reached else None
