"""Host rows that device kernels read and write in place (the caching tables' host storage)."""

from __future__ import annotations

import gc

import pytest
import torch

from dynemb import kernels
from dynemb.host_memory import device_view


def test_on_the_cpu_host_memory_is_the_device_memory() -> None:
    host = torch.zeros(4, 3)
    assert device_view(host, torch.device("cpu")) is host


def test_memory_kernels_cannot_use_gets_no_view() -> None:
    assert device_view(torch.zeros(4, 3, dtype=torch.float64), torch.device("cuda")) is None
    assert device_view(torch.zeros(3, 4).t(), torch.device("cuda")) is None
    assert device_view(torch.zeros(4, 3), torch.device("meta")) is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_kernels_read_and_write_host_rows_in_place() -> None:
    host = torch.arange(2000 * 8, dtype=torch.float32).view(2000, 8)
    view = device_view(host, torch.device("cuda", 0))
    assert view is not None and view.is_cuda and view.data_ptr() == host.data_ptr()
    slots = torch.randperm(2000, device="cuda")[:300]
    # Triton's strided gather and torch's indexing read the host rows; a scatter writes them.
    torch.testing.assert_close(kernels.gather_rows(view[:, :5], slots), host[slots.cpu(), :5].cuda(), rtol=0, atol=0)
    rows = torch.randn(300, 8, device="cuda")
    view[slots] = rows
    torch.cuda.synchronize()
    torch.testing.assert_close(host[slots.cpu()], rows.cpu(), rtol=0, atol=0)
    # Released with its last view: the memory can be registered again.
    del view
    gc.collect()
    again = device_view(host, torch.device("cuda", 0))
    assert again is not None
