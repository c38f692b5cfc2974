"""The kernel tests of ``test_dynemb_kernels.py`` under Triton's interpreter, as a child pytest started early.

The interpreter must be switched on (``TRITON_INTERPRET=1``) before Triton is first imported, so those tests
run in a child process of their own (see that file's docstring). The child takes minutes of one core and
needs nothing from the rest of the suite, so ``conftest.py`` starts it as soon as collection ends, where the
parent test is selected, and the parent test only waits for it: the suite's wall time does not grow by the
child's on a machine of two cores. Its output goes to a file, so that a long output never blocks it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
KERNEL_TESTS = HERE / "test_dynemb_kernels.py"
NODE_NAME = "test_kernels_under_the_triton_interpreter"
TIMEOUT_S = 600  # a loaded 2-core machine; alone it takes about 2.5 minutes

_child: tuple[subprocess.Popen[bytes], IO[bytes]] | None = None


def wanted() -> bool:
    """Whether the parent test would run the child here: no GPU (there the kernel tests run in the process
    itself), no interpreter switched on already, and Triton installed."""
    import torch

    return not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" and importlib.util.find_spec("triton") is not None


def start() -> None:
    """Start the child, once."""
    global _child
    if _child is not None:
        return
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    log = tempfile.NamedTemporaryFile(prefix="interpreted-kernels-", suffix=".log")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "triton_bounds", "-k", f"not {NODE_NAME}", str(KERNEL_TESTS)]
    _child = (subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=HERE.parent), log)


def result() -> tuple[int, str]:
    """The child's exit status and output, started now if it was not before."""
    start()
    assert _child is not None
    process, log = _child
    try:
        process.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log.seek(0)
    return process.returncode, log.read().decode(errors="replace")


def stop() -> None:
    """Kill a child still running when the session ends (its test deselected by -x, say)."""
    global _child
    if _child is not None:
        process, log = _child
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
        _child = None
