"""A pytest plugin (``-p cuda_path``, with ``TRITON_INTERPRET=1``) that sends CPU tensors down the
CUDA code path: every step through the Triton kernels (run by the interpreter) and the batch
checks deferred to the device record, as on a GPU. With ``-p triton_bounds`` it runs the library's
suites as a GPU would run them, where an out-of-bounds access or a reliance on program order
shows, e.g. to tell a kernel's logic from its compilation when a CUDA test fails:

    TRITON_INTERPRET=1 PYTHONPATH=tests python -m pytest -p cuda_path -p triton_bounds tests/test_dynemb_engine.py

Not for ``tests/test_dynemb_inputs.py``: it tests the CPU's eager checks, and defers them itself
where it tests the deferred ones.
"""

from __future__ import annotations

import dynemb.kernels as kernels
import dynemb.validation as validation

kernels._triton_for = lambda is_cuda: kernels.triton_importable()
validation.DEFERRED_DEVICE_TYPES = frozenset({"cuda", "cpu"})
