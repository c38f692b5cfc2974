"""Host rows that device kernels read and write in place (host storage of every storage mode)."""

from __future__ import annotations

import gc

import pytest
import torch

from dynemb import kernels
from dynemb.host_memory import device_view
from dynemb.kernels.operands import RowParts


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
    # The row kernels read and write the host rows in place, as torch's indexing does.
    parts = RowParts(view, view, 0, 1999)
    torch.testing.assert_close(kernels.gather_rows(parts, slots, 5), host[slots.cpu(), :5].cuda(), rtol=0, atol=0)
    rows = torch.randn(300, 8, device="cuda")
    kernels.scatter_rows(parts, slots, rows)
    torch.cuda.synchronize()
    torch.testing.assert_close(host[slots.cpu()], rows.cpu(), rtol=0, atol=0)
    view[slots[:10]] = rows[:10] + 1.0
    torch.cuda.synchronize()
    torch.testing.assert_close(host[slots[:10].cpu()], rows[:10].cpu() + 1.0, rtol=0, atol=0)
    # Released with its last view: the memory can be registered again.
    del view, parts
    gc.collect()
    again = device_view(host, torch.device("cuda", 0))
    assert again is not None
