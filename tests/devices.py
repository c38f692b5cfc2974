"""The devices the library's tests run on: always the CPU, CUDA where there is one."""

from __future__ import annotations

import pytest
import torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]),
]
